"""The chart installs, serves an eval, upgrades and uninstalls on the real test cluster.

The operator runs as a pod from the project's own image (imported into containerd, pull
policy Never) in a namespace enforcing Pod Security `restricted`, in namespaced mode for one
evals namespace; the example eval there completes with its known numbers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.helm_helpers import (
    CHART,
    Release,
    assert_example_numbers,
    ensure_image,
    example_eval,
    get_eval,
    installed_release,
    run,
    wait_complete,
)

EVAL = "support-agent"


@pytest.fixture(scope="module")
def release(cluster: Any, kubectl: Callable[..., str]) -> Iterator[Release]:
    """The chart installed for this module (image built first when needed)."""
    ensure_image(cluster.env())
    with installed_release(cluster.env(), kubectl) as installed:
        yield installed


def operator_pods(kubectl: Callable[..., str], release: Release) -> list[dict[str, Any]]:
    """The operator's pods (not terminating)."""
    pods = json.loads(
        kubectl(
            "get", "pods", "-n", release.namespace, "-o", "json",
            "-l", f"app.kubernetes.io/instance={release.name}",
        )
    )["items"]  # fmt: skip
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def operator_log(kubectl: Callable[..., str], release: Release) -> str:
    """The operator's log (for failure messages)."""
    return kubectl("logs", "-n", release.namespace, f"deploy/{release.fullname}", check=False)


def is_ready(pod: dict[str, Any]) -> bool:
    """Whether a pod reports the Ready condition."""
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_operator_runs_from_the_local_image(release: Release, kubectl: Callable[..., str]) -> None:
    """One Ready operator pod, from localhost/passhat/passhat:test, as UID 65532."""
    (pod,) = operator_pods(kubectl, release)
    assert is_ready(pod)
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "localhost/passhat/passhat:test"
    assert container["args"][:1] == ["operator"]
    assert f"--namespace={release.evals_namespace}" in container["args"]
    assert pod["spec"]["securityContext"]["runAsUser"] == 65532
    (status,) = pod["status"]["containerStatuses"]
    assert status["restartCount"] == 0


def test_eval_in_another_namespace_completes_exactly(
    release: Release, kubectl: Callable[..., str]
) -> None:
    """examples/eval.yaml in the evals namespace ends Complete with its known numbers."""
    kubectl("apply", "-n", release.evals_namespace, "-f", "-", input=example_eval(EVAL))
    status = wait_complete(kubectl, release.evals_namespace, EVAL)
    assert_example_numbers(status)
    listed = kubectl("get", "consistencyevals", "-n", release.evals_namespace)
    assert EVAL in listed


def passhat(cluster: Any, *args: str) -> str:
    """`passhat ARGS` as a user would type it ($KUBECONFIG: the cluster's admin one)."""
    env = cluster.env()
    result = subprocess.run(
        [sys.executable, "-m", "passhat", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_every_attempt_of_the_example_is_on_the_record(
    release: Release, cluster: Any, kubectl: Callable[..., str], tmp_path: Path
) -> None:
    """The helm-installed operator archives every attempt into S3; `passhat trials` reads
    them back through the records API (20 rows: 16 slots + 4 retried exit-75 infra errors,
    each with its pod and node), they score like the status, and a flaky task's
    transcripts are readable after every pod of the eval is deleted."""
    ns = release.evals_namespace
    status = wait_complete(kubectl, ns, EVAL)
    assert status["summary"]["infraErrorsByReason"] == {"reported": 4}
    rows_file = tmp_path / "trials.jsonl"
    passhat(cluster, "trials", EVAL, "-n", ns, "--out", str(rows_file))
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    got = sorted((r["task_id"], r["trial"], r["attempt"]) for r in rows)
    assert len(rows) == 20, (got, operator_log(kubectl, release))
    infra = [r for r in rows if r["outcome"] == "infra_error"]
    assert [(r["task_id"], r["attempt"], r["final"], r["exit_code"]) for r in infra] == [
        ("change-address", 0, False, 75)
    ] * 4
    assert all(r["reason"] == "reported" for r in infra)
    assert all(r["pod"] and r["node"] == "passhat-node" and r["finished_at"] for r in rows)
    ks = ("--k", "1", "--k", "2", "--k", "4")  # the example's spec.ks
    scored = json.loads(passhat(cluster, "score", str(rows_file), *ks, "--format", "json"))
    reported = json.loads(passhat(cluster, "report", EVAL, "-n", ns, "--format", "json"))
    assert scored == reported
    kubectl("delete", "pods", "-n", ns, "-l", "passhat.dev/eval=" + EVAL, "--wait=true")
    out = tmp_path / "flaky"
    passhat(
        cluster, "transcripts", EVAL, "-n", ns, "--task", "refund-over-limit", "--out", str(out)
    )
    logs = sorted((out / "transcripts" / "refund-over-limit").glob("*.log"))
    assert [p.name for p in logs] == ["0-0.log", "1-0.log", "2-0.log", "3-0.log"]
    assert all(p.read_text().startswith("==> ") for p in logs)


@pytest.mark.parametrize(
    ("verb", "resource", "where", "allowed"),
    [
        ("create", "pods", "evals", True),
        ("patch", "consistencyevals.passhat.dev --subresource=status", "evals", True),
        ("create", "pods", "other", False),
        ("list", "consistencyevals.passhat.dev", "other", False),
        ("list", "consistencyevals.passhat.dev", "all", False),
        ("get", "secrets", "evals", False),
        ("get", "secrets", "system", False),
        ("create", "pods --subresource=exec", "evals", False),
        ("create", "pods --subresource=eviction", "evals", False),
        # NB: exactly the calls it makes (kube.API_CALLS): ConfigMaps by name only, logs
        ("get", "configmaps", "evals", True),
        ("list", "configmaps", "evals", False),
        ("watch", "configmaps", "evals", False),
        ("get", "pods --subresource=log", "evals", True),
        ("update", "consistencyevals.passhat.dev", "evals", False),
    ],
)
def test_namespaced_mode_rights(
    release: Release,
    kubectl: Callable[..., str],
    verb: str,
    resource: str,
    where: str,
    allowed: bool,
) -> None:
    """The operator may act in its evals namespace only, and never read Secrets."""
    scope = {
        "evals": ["-n", release.evals_namespace],
        "other": ["-n", release.other_namespace],
        "system": ["-n", release.namespace],
        "all": ["--all-namespaces"],
    }[where]
    answer = kubectl(
        "auth",
        "can-i",
        verb,
        *resource.split(),
        *scope,
        f"--as={release.service_account}",
        check=False,
    ).strip()
    assert answer == ("yes" if allowed else "no"), (verb, resource, where, answer)


def test_other_namespace_eval_is_left_alone(release: Release, kubectl: Callable[..., str]) -> None:
    """An eval in a namespace the release was not given gets no status and no pods."""
    kubectl("apply", "-n", release.other_namespace, "-f", "-", input=example_eval("ignored"))
    # NB: a one-trial eval in the served namespace completing shows the operator was busy
    # serving (not stuck) while the ignored one sat there.
    served = "served-after-ignored"
    kubectl("apply", "-n", release.evals_namespace, "-f", "-", input=example_eval(served, 1))
    wait_complete(kubectl, release.evals_namespace, served)
    assert not get_eval(kubectl, release.other_namespace, "ignored").get("status")
    pods = kubectl("get", "pods", "-n", release.other_namespace, "-o", "name")
    assert pods.strip() == ""


def test_upgrade_rolls_the_operator_and_keeps_status(
    release: Release, cluster: Any, kubectl: Callable[..., str]
) -> None:
    """`helm upgrade` replaces the operator pod; finished evals keep their exact status."""
    (before,) = operator_pods(kubectl, release)
    run(
        [
            "helm", "upgrade", release.name, str(CHART), "-n", release.namespace,
            # NB: --reuse-values, as a user upgrades: the install's values (its record
            # store among them) stay; without them the store would fall back to the
            # chart's PVC default, which this cluster has no provisioner for.
            "--reuse-values", "--set", "podAnnotations.passhat\\.dev/upgraded=yes",
            "--wait", "--timeout", "600s",
        ],
        cluster.env(),
        timeout=700,
    )  # fmt: skip
    (after,) = operator_pods(kubectl, release)
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
    assert after["metadata"]["annotations"]["passhat.dev/upgraded"] == "yes"
    assert is_ready(after)
    status = get_eval(kubectl, release.evals_namespace, EVAL)["status"]
    assert_example_numbers(status)
    history = run(["helm", "history", release.name, "-n", release.namespace], cluster.env())
    assert "upgrade complete" in history.lower()


def test_uninstall_removes_the_operator_keeps_the_crd(
    release: Release, cluster: Any, kubectl: Callable[..., str], wait_for: Callable[..., Any]
) -> None:
    """`helm uninstall` removes the release's objects; the CRD (and so user data) stays;
    a finished eval carries no finalizer, so it can be deleted with no operator left."""
    run(
        ["helm", "uninstall", release.name, "-n", release.namespace, "--wait"],
        cluster.env(),
    )
    for kind in ("deployment", "serviceaccount", "service"):
        left = kubectl("get", kind, release.fullname, "-n", release.namespace, check=False)
        assert release.fullname not in left, kind
    roles = kubectl("get", "roles,rolebindings", "-n", release.evals_namespace, "-o", "name")
    assert release.fullname not in roles
    kubectl("get", "crd", "consistencyevals.passhat.dev")
    assert get_eval(kubectl, release.evals_namespace, EVAL)["status"]["summary"]
    ns = release.evals_namespace
    kubectl("delete", "ceval", EVAL, "-n", ns, "--wait=true", "--timeout=60s")

    def trial_pods_left() -> bool:
        selector = f"passhat.dev/eval={EVAL}"
        return not kubectl("get", "pods", "-n", ns, "-l", selector, "-o", "name")

    wait_for(trial_pods_left, 120, "the deleted eval's kept pods to be collected")
