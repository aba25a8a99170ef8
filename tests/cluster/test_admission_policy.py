"""The chart's admission rule on the real API server: an eval needs its author's right to
create pods in its namespace (ValidatingAdmissionPolicy, docs/security.md).

Users are impersonated (`kubectl --as`): one may create ConsistencyEvals only, one may also
create pods. The policy is the chart's, rendered by helm and applied as it is; its binding
is the chart's too, narrowed to this test's namespace (a `namespaceSelector`), so that evals
other tests create on the shared cluster at the same time are not judged by it. The last
test installs the whole chart with Helm and drives its operator as those users. The plain
manifest for installs without Helm equals the chart's (test_chart_admission_policy.py) and
is checked here to be accepted by the API server.
"""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from tests.cluster.helm_helpers import ensure_image, installed_release
from tests.cluster.operator_helpers import condition, eval_manifest, get_eval, install_crd
from tests.unit.chart_helpers import CHART, REPO, helm

PLAIN = REPO / "deploy" / "admission-policy.yaml"
EVAL_ONLY = "alice@example.com"
EVAL_AND_PODS = "bob@example.com"
POLICY_SUFFIX = "-passhat.eval-author-pod-rights.passhat.dev"


def as_user(cluster: Any, user: str, *args: str, manifest: dict[str, Any]) -> tuple[int, str]:
    """`kubectl --as USER ARGS -f -` with `manifest`: (exit code, stderr)."""
    proc = subprocess.run(
        [str(cluster.bin / "kubectl"), "--as", user, *args, "-f", "-"],
        input=yaml.safe_dump(manifest),
        capture_output=True,
        text=True,
        env=cluster.env(),
        timeout=120,
        check=False,
    )
    return proc.returncode, proc.stderr.strip()


def grant(kubectl: Callable[..., str], namespace: str, user: str, *, pods: bool) -> None:
    """A Role and RoleBinding: create/get ConsistencyEvals, and create pods when `pods`."""
    rules = [
        {
            "apiGroups": ["passhat.dev"],
            "resources": ["consistencyevals"],
            "verbs": ["create", "get"],
        }
    ]
    if pods:
        rules.append({"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]})
    name = "pods-and-evals" if pods else "evals-only"
    objects = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    ]
    kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))


@pytest.fixture
def policy(kubectl: Callable[..., str], namespace: str) -> Iterator[str]:
    """The chart's policy and binding (the binding narrowed to `namespace`), applied; the
    policy's name. Removed afterwards."""
    release = f"adm-{uuid.uuid4().hex[:6]}"
    rendered = helm(
        "template",
        release,
        str(CHART),
        "--namespace",
        "passhat-system",
        "--show-only",
        "templates/admission-policy.yaml",
    ).stdout
    policy, binding = [doc for doc in yaml.safe_load_all(rendered) if doc]
    binding["spec"]["matchResources"] = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    }
    kubectl("apply", "-f", "-", input=yaml.safe_dump_all([policy, binding]))
    name = str(policy["metadata"]["name"])
    try:
        yield name
    finally:
        kubectl(
            "delete", "validatingadmissionpolicybinding", name, "--ignore-not-found", check=False
        )
        kubectl("delete", "validatingadmissionpolicy", name, "--ignore-not-found", check=False)


def test_eval_needs_the_authors_right_to_create_pods(
    cluster: Any, kubectl: Callable[..., str], namespace: str, policy: str
) -> None:
    """A user with eval rights but no pod rights is refused, the message naming the user and
    the missing right; a user with both is admitted (a real object, not a dry run)."""
    install_crd(kubectl)
    grant(kubectl, namespace, EVAL_ONLY, pods=False)
    grant(kubectl, namespace, EVAL_AND_PODS, pods=True)
    manifest = eval_manifest("sneaky", tasks=1, trials=1, parallelism=1, ks=[1])
    create = ["create", "-n", namespace]

    # NB: a new policy takes a moment to be enforced; ask with server dry runs until it is
    deadline = time.monotonic() + 60
    dry_run = [*create, "--dry-run=server"]
    while as_user(cluster, EVAL_ONLY, *dry_run, manifest=manifest)[0] == 0:
        assert time.monotonic() < deadline, "the policy was never enforced"
        time.sleep(1.0)

    code, error = as_user(cluster, EVAL_ONLY, *create, manifest=manifest)
    assert code != 0
    print(error)
    # NB: a Helm release's binding judges every namespace, so the chart's policy of a release
    # on the cluster (another test's, or one left behind) may answer first: the same rule
    denied_by = re.search(r"ValidatingAdmissionPolicy '([^']+)'", error)
    assert denied_by, error
    assert denied_by[1] == policy or denied_by[1].endswith(POLICY_SUFFIX), error
    assert f"user {EVAL_ONLY} may not create a ConsistencyEval in namespace {namespace}" in error
    assert f'(verb create, resource pods, apiGroup "", namespace {namespace})' in error
    assert kubectl("get", "ceval", "-n", namespace, "-o", "name") == ""

    code, error = as_user(cluster, EVAL_AND_PODS, *create, manifest=manifest)
    assert code == 0, error
    assert kubectl("get", "ceval", "-n", namespace, "-o", "name").strip() == (
        "consistencyeval.passhat.dev/sneaky"
    )


def test_plain_manifest_is_accepted_by_the_api_server(kubectl: Callable[..., str]) -> None:
    """deploy/admission-policy.yaml applies (server dry run: the API server validates the
    objects and compiles the CEL) on the test cluster's Kubernetes."""
    out = kubectl("apply", "--dry-run=server", "-f", str(PLAIN))
    assert "validatingadmissionpolicy.admissionregistration.k8s.io/eval-author-pod-rights" in out
    assert "validatingadmissionpolicybinding" in out


def test_helm_installed_operator_serves_only_what_the_author_may(
    cluster: Any, kubectl: Callable[..., str], api_client: Any
) -> None:
    """With the chart installed by Helm (its policy and binding as shipped): the user without
    pod rights is refused at admission; the one with them gets a kwok eval run to Complete by
    the operator pod, and a root template of theirs stopped with a ConfigError naming the
    field and no pod (the restricted check in the operator image)."""
    ensure_image(cluster.env())
    sets = ("records.store=none", "recordsApi.enabled=false")
    with installed_release(cluster.env(), kubectl, *sets) as release:
        namespace = release.evals_namespace
        name = f"{release.namespace}.{release.fullname}.eval-author-pod-rights.passhat.dev"
        assert kubectl("get", "validatingadmissionpolicybinding", name, "-o", "name").strip()
        grant(kubectl, namespace, EVAL_ONLY, pods=False)
        grant(kubectl, namespace, EVAL_AND_PODS, pods=True)
        create = ["create", "-n", namespace]
        plain = eval_manifest("plain", tasks=1, trials=2, parallelism=2, ks=[1, 2], scripted=False)
        deadline = time.monotonic() + 60
        while as_user(cluster, EVAL_ONLY, *create, "--dry-run=server", manifest=plain)[0] == 0:
            assert time.monotonic() < deadline, "the chart's policy was never enforced"
            time.sleep(1.0)
        code, error = as_user(cluster, EVAL_ONLY, *create, manifest=plain)
        assert code != 0 and f"user {EVAL_ONLY} may not create a ConsistencyEval" in error, error

        root = eval_manifest("root", tasks=1, trials=1, parallelism=1, ks=[1], scripted=False)
        agent = root["spec"]["trial"]["template"]["spec"]["containers"][0]
        agent["securityContext"] = {"runAsUser": 0}
        for manifest in (plain, root):
            code, error = as_user(cluster, EVAL_AND_PODS, *create, manifest=manifest)
            assert code == 0, error
        deadline = time.monotonic() + 300
        while True:
            done = get_eval(api_client, namespace, "plain")
            stopped = get_eval(api_client, namespace, "root")
            if (
                condition(done, "Complete") == "True"
                and condition(stopped, "ConfigError") == "True"
            ):
                break
            assert time.monotonic() < deadline, f"plain: {done}\nroot: {stopped}"
            time.sleep(2.0)
        assert done is not None and done["status"]["progress"]["done"] == 2
        assert stopped is not None
        assert stopped["status"]["message"].startswith(
            "spec.trial.template.spec.containers[0].securityContext.runAsUser: 0 is root"
        )
        pods = kubectl("get", "pods", "-n", namespace, "-l", "passhat.dev/eval=root", "-o", "name")
        assert pods.strip() == ""
