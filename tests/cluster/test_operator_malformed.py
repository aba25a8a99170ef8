"""Malformed ConsistencyEvals: each is refused at admission or gets a ConfigError naming
the field, no pod is created for it, and a valid eval next to them still completes.

Every resource is created at once (with `kubectl create`, as a user would) against one
operator; each parametrized test then checks one case, so a single cluster round serves
them all. A case passes either way the project may enforce it (CRD schema / CEL at
admission, or the operator's ConfigError); what it pins is that the message names the
field to fix.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from passhat.operator.main import API_MAX_JSON_DEPTH
from tests.cluster.kube_helpers import as_body
from tests.cluster.operator_helpers import (
    OperatorProcess,
    condition,
    delete_evals,
    eval_manifest,
    get_eval,
    install_crd,
    trial_pods,
    wait_for_condition,
)
from tests.cluster.surface_helpers import http_get, metrics_port, module_namespace, shutdown

Manifest = dict[str, Any]
SETTLE_TIMEOUT_S = 420
# The namespace enforces Pod Security "restricted", as a shared cluster would.
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}


def base(name: str) -> Manifest:
    """A valid eval on kwok nodes (2 tasks x 2 trials) to break one field of."""
    manifest = eval_manifest(name, tasks=2, trials=2, parallelism=4, ks=[1, 2], scripted=False)
    manifest["spec"]["retry"] = {"infraErrors": 1, "backoffSeconds": 0}
    return manifest


def container(m: Manifest) -> dict[str, Any]:
    """The first container of a manifest's template."""
    first: dict[str, Any] = m["spec"]["trial"]["template"]["spec"]["containers"][0]
    return first


def pod_spec(m: Manifest) -> dict[str, Any]:
    """The template's pod spec."""
    spec: dict[str, Any] = m["spec"]["trial"]["template"]["spec"]
    return spec


def security(m: Manifest) -> dict[str, Any]:
    """The first container's securityContext (created empty)."""
    ctx: dict[str, Any] = container(m).setdefault("securityContext", {})
    return ctx


def tasks_from(m: Manifest, config_map: str, key: str | None = None) -> None:
    """Replace the inline tasks by a ConfigMap reference."""
    del m["spec"]["tasks"]
    ref = {"configMap": config_map}
    if key is not None:
        ref["key"] = key
    m["spec"]["tasksFrom"] = [ref]


@dataclass(frozen=True)
class Case:
    """One malformed eval: how to break the base manifest and what the error must name."""

    name: str
    breaks: Callable[[Manifest], None]
    names: str  # a regex the admission error or the ConfigError message must match
    config_maps: dict[str, dict[str, str]] = field(default_factory=dict)


def _set(path: str, value: Any) -> Callable[[Manifest], None]:
    def apply(m: Manifest) -> None:
        *parents, last = path.split(".")
        node = m["spec"]
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value

    return apply


def _tasks(n: int) -> Callable[[Manifest], None]:
    def apply(m: Manifest) -> None:
        m["spec"]["tasks"] = [{"id": f"t{i}"} for i in range(n)]

    return apply


def _too_large(m: Manifest) -> None:
    """63 KiB of params (under their 64 KiB limit) copied into the env of 52 containers: a
    pod body over the API server's 3 MiB request limit."""
    m["spec"]["tasks"][0]["params"] = {"blob": "x" * (63 * 1024)}
    pod_spec(m)["containers"] = [{**container(m), "name": f"c{i}"} for i in range(52)]


def _read_twice(m: Manifest) -> None:
    """Key t of a ConfigMap, then the whole ConfigMap again."""
    tasks_from(m, "twice-suite", "t")
    m["spec"]["tasksFrom"].append({"configMap": "twice-suite"})


def _with(fn: Callable[[Manifest], Any]) -> Callable[[Manifest], None]:
    def apply(m: Manifest) -> None:
        fn(m)

    return apply


CASES = [
    Case("k-zero", _set("ks", [0, 1]), r"\bks\b"),
    Case("k-above-trials", _set("ks", [1, 5]), r"\bks\b"),
    Case("k-twice", _set("ks", [1, 1]), r"\bks\b"),
    Case("trials-zero", _set("trials", 0), r"\btrials\b"),
    Case("parallelism-zero", _set("parallelism", 0), r"\bparallelism\b"),
    Case("no-tasks-at-all", _with(lambda m: m["spec"].pop("tasks")), r"\btasks"),
    Case(
        "tasks-and-tasks-from",
        _set("tasksFrom", [{"configMap": "suite"}]),
        r"\btasks",
    ),
    Case(
        "duplicate-task-ids",
        _set("tasks", [{"id": "same"}, {"id": "same"}]),
        r"\btasks\b|duplicate",
    ),
    Case("missing-containers", _with(lambda m: pod_spec(m).pop("containers")), r"containers"),
    Case("empty-containers", _with(lambda m: pod_spec(m).update(containers=[])), r"containers"),
    Case("container-without-name", _with(lambda m: container(m).pop("name")), r"\bname\b"),
    Case(
        "privileged",
        _with(lambda m: security(m).update(privileged=True)),
        r"\bprivileged\b",
    ),
    Case(
        "privilege-escalation",
        _with(lambda m: security(m).update(allowPrivilegeEscalation=True)),
        r"allowPrivilegeEscalation",
    ),
    Case(
        "added-capabilities",
        _with(lambda m: security(m).update(capabilities={"add": ["NET_ADMIN"]})),
        r"capabilities",
    ),
    Case("host-network", _with(lambda m: pod_spec(m).update(hostNetwork=True)), r"hostNetwork"),
    Case("host-pid", _with(lambda m: pod_spec(m).update(hostPID=True)), r"hostPID"),
    Case(
        "host-path-volume",
        _with(lambda m: pod_spec(m).update(volumes=[{"name": "root", "hostPath": {"path": "/"}}])),
        r"hostPath",
    ),
    Case(
        "host-port",
        _with(lambda m: container(m).update(ports=[{"containerPort": 80, "hostPort": 8080}])),
        r"hostPort",
    ),
    Case("unknown-spec-field", _set("bogusField", 1), r"bogusField"),
    Case(
        "bad-quantity",
        _with(lambda m: container(m).update(resources={"requests": {"memory": "lots"}})),
        r"memory|requests",
    ),
    Case(
        "request-above-limit",
        _with(
            lambda m: container(m).update(
                resources={"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}
            )
        ),
        r"memory|requests|limit",
    ),
    Case("missing-image", _with(lambda m: container(m).pop("image")), r"\bimage\b"),
    Case(
        "missing-config-map",
        _with(lambda m: tasks_from(m, "no-such-suite")),
        r"configMap|no-such-suite",
    ),
    Case(
        "config-map-bad-yaml",
        _with(lambda m: tasks_from(m, "bad-yaml-suite", "tasks")),
        r"tasksFrom|bad-yaml-suite",
        config_maps={"bad-yaml-suite": {"tasks": "- id: a\n  params: {unclosed: [1, 2\n"}},
    ),
    Case("huge-inline-task-list", _tasks(10_001), r"spec\.tasks|\btasks\b"),
    Case(
        "too-many-trial-slots",
        _with(lambda m: (_tasks(201)(m), _set("trials", 1000)(m))),
        r"trial slots|\btasks\b|\btrials\b",
    ),
    # Bounded input (#17 §2): one eval may not take the operator from the others.
    Case("parallelism-over-10000", _set("parallelism", 10_001), r"\bparallelism\b"),
    Case(
        "params-over-64-kib",
        _set("tasks", [{"id": "a", "params": {"blob": "x" * (65 * 1024)}}]),
        r"spec\.tasks\[0\]\.params: \d+ bytes as JSON",
    ),
    Case(
        "config-map-read-twice",
        _read_twice,
        r"tasksFrom\[1\].*already read by spec\.tasksFrom\[0\]",
        config_maps={"twice-suite": {"t": "[{id: a}]"}},
    ),
    Case("gate-k-above-trials", _set("gate", {"metric": "passHatK", "k": 3, "min": 0.5}), "gate"),
    Case("gate-min-above-one", _set("gate", {"metric": "passHatK", "k": 1, "min": 1.5}), r"min"),
    Case("gate-unknown-metric", _set("gate", {"metric": "vibes", "k": 1, "min": 0.5}), r"metric"),
    Case("negative-timeout", _set("trial.timeoutSeconds", -5), r"timeoutSeconds"),
    Case("timeout-is-unknown", _set("trial.timeoutIs", "shrug"), r"timeoutIs"),
    Case(
        "exit-code-in-pass-and-fail",
        _set("grading", {"exitCodes": {"pass": [0], "fail": [0, 1]}}),
        r"exitCodes|\bfail\b",
    ),
    Case(
        "exit-code-out-of-range",
        _set("grading", {"exitCodes": {"infraError": [75, 300]}}),
        r"exitCodes|infraError",
    ),
    Case("negative-retries", _set("retry.infraErrors", -1), r"infraErrors"),
    # Past the spec checks, refused only when the operator creates the pod:
    Case(
        "invalid-container-name",
        _with(lambda m: container(m).update(name="Not_A_DNS_Label")),
        r"\bname\b",
    ),
    Case(
        "violates-pod-security",
        _with(lambda m: security(m).update(seccompProfile={"type": "Unconfined"})),
        r"PodSecurity|seccomp",
    ),
    # Beyond Pod Security "restricted": refused by the operator before any pod, whatever
    # the namespace's own labels say (docs/security.md); each passed before #17.
    Case("run-as-uid-0", _with(lambda m: security(m).update(runAsUser=0)), r"runAsUser: 0"),
    Case(
        "pod-run-as-uid-0",
        _with(lambda m: pod_spec(m).update(securityContext={"runAsUser": 0})),
        r"spec\.securityContext\.runAsUser: 0",
    ),
    Case(
        "run-as-non-root-false",
        _with(lambda m: security(m).update(runAsNonRoot=False)),
        r"runAsNonRoot: false",
    ),
    Case(
        "pod-seccomp-unconfined",
        _with(
            lambda m: pod_spec(m).update(securityContext={"seccompProfile": {"type": "Unconfined"}})
        ),
        r"spec\.securityContext\.seccompProfile",
    ),
    Case(
        "apparmor-unconfined",
        _with(lambda m: security(m).update(appArmorProfile={"type": "Unconfined"})),
        r"appArmorProfile",
    ),
    Case(
        "apparmor-annotation-unconfined",
        _with(
            lambda m: m["spec"]["trial"]["template"]["metadata"]["annotations"].update(
                {"container.apparmor.security.beta.kubernetes.io/agent": "unconfined"}
            )
        ),
        r"container\.apparmor\.security\.beta\.kubernetes\.io/agent",
    ),
    Case(
        "selinux-custom-type",
        _with(lambda m: security(m).update(seLinuxOptions={"type": "spc_t"})),
        r"seLinuxOptions\.type",
    ),
    Case(
        "sysctls",
        _with(
            lambda m: pod_spec(m).update(
                securityContext={"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]}
            )
        ),
        r"sysctls",
    ),
    *(
        Case(
            f"{kind.lower()}-volume",
            _set("trial.template.spec.volumes", [{"name": "v", kind: source}]),
            rf"volumes\[0\]\.{kind}",
        )
        for kind, source in (
            ("nfs", {"server": "10.0.0.1", "path": "/"}),
            ("iscsi", {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.2001-04.com.x:t", "lun": 0}),
            ("rbd", {"monitors": ["10.0.0.1:6789"], "image": "i"}),
            ("flexVolume", {"driver": "example/x"}),
            ("gitRepo", {"repository": "https://example.com/x.git"}),
        )
    ),
    Case(
        "proc-mount-unmasked",
        _with(lambda m: security(m).update(procMount="Unmasked")),
        r"procMount",
    ),
    Case(
        "windows-host-process",
        _with(lambda m: security(m).update(windowsOptions={"hostProcess": True})),
        r"hostProcess",
    ),
    Case(
        "probe-host",
        _with(
            lambda m: container(m).update(
                livenessProbe={"httpGet": {"host": "169.254.169.254", "path": "/", "port": 80}}
            )
        ),
        r"livenessProbe\.httpGet\.host",
    ),
    # Scheduling fields: refused, or allowed only from the chart's lists.
    Case("node-name", _with(lambda m: pod_spec(m).update(nodeName="kwok-node-0")), r"nodeName"),
    Case(
        "tolerate-every-taint",
        _with(lambda m: pod_spec(m)["tolerations"].append({"operator": "Exists"})),
        r"tolerations\[1\].*operator\.allowTolerateAll",
    ),
    Case(
        "priority-class-not-listed",
        _with(lambda m: pod_spec(m).update(priorityClassName="system-node-critical")),
        r"priorityClassName.*operator\.allowedPriorityClasses",
    ),
    Case(
        "runtime-class-not-listed",
        _with(lambda m: pod_spec(m).update(runtimeClassName="runc-host")),
        r"runtimeClassName.*operator\.allowedRuntimeClasses",
    ),
    # Type confusion: the CRD and the model accept these; the API server cannot decode the
    # pod (400) or take its body (413). Retried forever with no event before #17.
    Case(
        "type-confusion-host-network",
        _with(lambda m: pod_spec(m).update(hostNetwork="true")),
        r"HTTP 400.*hostNetwork",
    ),
    Case(
        "type-confusion-grace-period",
        _with(lambda m: pod_spec(m).update(terminationGracePeriodSeconds="30")),
        r"HTTP 400.*terminationGracePeriodSeconds",
    ),
    Case("pod-over-request-limit", _with(lambda m: _too_large(m)), r"HTTP 413"),
]


@dataclass
class Created:
    """What happened to one case: refused (kubectl's error) or admitted (final object)."""

    refused: str | None = None
    body: dict[str, Any] | None = None


@dataclass
class Run:
    """The whole module's cluster round."""

    namespace: str
    operator: OperatorProcess
    results: dict[str, Created]
    valid: dict[str, Any]


def kubectl_create(cluster: Any, namespace: str, manifest: Manifest | str) -> str | None:
    """`kubectl create -f -` as a user would (a manifest, or its text as is); None on
    success, else kubectl's error text."""
    proc = subprocess.run(
        [str(cluster.bin / "kubectl"), "create", "-n", namespace, "-f", "-"],
        input=manifest if isinstance(manifest, str) else yaml.safe_dump(manifest, sort_keys=False),
        capture_output=True,
        text=True,
        env=cluster.env(),
        timeout=300,
        check=False,
    )
    return None if proc.returncode == 0 else (proc.stderr.strip() or proc.stdout.strip())


def settled(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The eval once it carries a ConfigError (or is complete: the case went unnoticed)."""
    body = get_eval(api, namespace, name)
    if condition(body, "ConfigError") == "True" or condition(body, "Complete") == "True":
        return body
    return None


@pytest.fixture(scope="module")
def run(
    cluster: Any,
    kubectl: Callable[..., str],
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Run]:
    """Create every case and a valid eval under one operator; wait until all settle."""
    install_crd(kubectl)
    log_dir: Path = tmp_path_factory.mktemp("malformed")
    with module_namespace(core_v1, "malformed", labels=RESTRICTED) as namespace:
        operator = OperatorProcess(
            kubeconfig=cluster.kubeconfig,
            namespaces=[namespace],
            log_path=log_dir / "operator.log",
            extra_args=["--set", "resync_interval_s=2", "--set", "image_error_grace_s=10"],
        )
        operator.start()
        try:
            for case in CASES:
                for cm_name, data in case.config_maps.items():
                    configmap = {"metadata": {"name": cm_name}, "data": data}
                    core_v1.create_namespaced_config_map(
                        namespace, as_body(configmap, client.V1ConfigMap)
                    )
            results: dict[str, Created] = {}
            for case in CASES:
                manifest = base(case.name)
                case.breaks(manifest)
                results[case.name] = Created(refused=kubectl_create(cluster, namespace, manifest))
            assert kubectl_create(cluster, namespace, base("valid")) is None
            valid = wait_for_condition(
                api_client,
                namespace,
                "valid",
                "Complete",
                timeout=SETTLE_TIMEOUT_S,
                operator=operator,
            )
            deadline = time.monotonic() + SETTLE_TIMEOUT_S
            for name, created in results.items():
                if created.refused is not None:
                    continue
                while (body := settled(api_client, namespace, name)) is None:
                    operator.assert_running()
                    if time.monotonic() > deadline:
                        pytest.fail(
                            f"{name}: admitted but never got a ConfigError\n{operator.log_tail()}"
                        )
                    time.sleep(1.0)
                created.body = body
            yield Run(namespace, operator, results, valid)
        finally:
            shutdown(operator, kubectl, namespace)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_malformed_eval_is_refused_naming_the_field(
    run: Run, core_v1: client.CoreV1Api, case: Case
) -> None:
    """Refused at admission, or ConfigError=True with the field in its message; no pods."""
    created = run.results[case.name]
    if created.refused is not None:
        print(f"refused at admission: {created.refused}")
        assert re.search(case.names, created.refused), created.refused
        return
    body = created.body
    assert body is not None
    conditions = {c["type"]: c for c in body["status"].get("conditions") or []}
    assert "ConfigError" in conditions, f"admitted and ran: {body['status']}"
    message = conditions["ConfigError"]["message"]
    print(f"ConfigError: {message}")
    assert re.search(case.names, message), message
    assert conditions["ConfigError"]["reason"]
    uid = body["metadata"]["uid"]
    pods = [
        p
        for p in trial_pods(core_v1, run.namespace)
        if p["metadata"]["labels"].get("passhat.dev/eval-uid") == uid
    ]
    assert pods == [], [p["metadata"]["name"] for p in pods]


def test_valid_eval_beside_them_completes(run: Run) -> None:
    """The valid eval completed with every trial passed; the operator is alive and healthy."""
    status = run.valid["status"]
    assert status["progress"]["done"] == 4
    assert [row["meanPassRate"] for row in status["summary"]["byK"]] == [1.0, 1.0]
    run.operator.assert_running()
    assert http_get(metrics_port(run.operator), "/healthz") == (200, "ok")


def test_at_least_twenty_cases() -> None:
    """The suite keeps covering at least 20 distinct malformed resources."""
    assert len({case.name for case in CASES}) == len(CASES) >= 20


def test_privileged_trials_are_a_per_namespace_grant(
    cluster: Any,
    kubectl: Callable[..., str],
    api_client: client.ApiClient,
    core_v1: client.CoreV1Api,
    namespace: str,
    tmp_path: Path,
) -> None:
    """With --allow-privileged-trials-in NS (chart value operator.privilegedNamespaces) the
    privileged, root, host-network template runs in NS; the same operator refuses it in
    another namespace it serves."""
    install_crd(kubectl)
    with module_namespace(core_v1, "unprivileged") as other:
        operator = OperatorProcess(
            kubeconfig=cluster.kubeconfig,
            namespaces=[namespace, other],
            log_path=tmp_path / "operator.log",
            extra_args=["--allow-privileged-trials-in", namespace],
        )
        operator.start()
        try:
            manifest = base("privileged")
            security(manifest).update(privileged=True, runAsUser=0)
            pod_spec(manifest).update(hostNetwork=True)
            assert kubectl_create(cluster, namespace, manifest) is None
            assert kubectl_create(cluster, other, manifest) is None
            body = wait_for_condition(
                api_client,
                namespace,
                "privileged",
                "Complete",
                timeout=SETTLE_TIMEOUT_S,
                operator=operator,
            )
            assert body["status"]["progress"]["done"] == 4
            assert condition(body, "ConfigError") != "True"
            refused = wait_for_condition(
                api_client, other, "privileged", "ConfigError", timeout=120, operator=operator
            )
            message = refused["status"]["message"]
            assert "securityContext.privileged" in message, message
            assert f"namespace {other} more: chart value operator.privilegedNamespaces" in message
            assert trial_pods(core_v1, other) == []
        finally:
            delete_evals(kubectl, other, timeout_s=180)
            shutdown(operator, kubectl, namespace)


def test_deeply_nested_params_do_not_stop_the_operator(
    cluster: Any,
    kubectl: Callable[..., str],
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    """An eval whose params nest 5,000 levels deep runs, and so does the eval beside it
    (Python's json stopped at ~1,000 levels, and kopf's watcher, i.e. the operator, with
    it). NB: not at the API server's own limit: an object it accepts within a few levels
    of that limit breaks its list of the whole resource (docs/operator.md)."""
    install_crd(kubectl)
    operator = OperatorProcess(
        kubeconfig=cluster.kubeconfig,
        namespaces=[namespace],
        log_path=tmp_path / "operator.log",
        extra_args=["--set", "resync_interval_s=2"],
    )
    # NB: built as text: this test process keeps Python's default recursion limit
    manifest = base("deep")
    manifest["spec"]["tasks"][0]["params"] = "PARAMS"
    levels = API_MAX_JSON_DEPTH // 2
    text = json.dumps(manifest).replace('"PARAMS"', '{"a":' * levels + "1" + "}" * levels)
    operator.start()
    try:
        assert kubectl_create(cluster, namespace, text) is None
        assert kubectl_create(cluster, namespace, base("valid")) is None
        valid = wait_for_condition(
            api_client, namespace, "valid", "Complete", timeout=SETTLE_TIMEOUT_S, operator=operator
        )
        assert valid["status"]["progress"]["done"] == 4
        jsonpath = '{.status.progress.done} {.status.conditions[?(@.type=="Complete")].status}'
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while (
            state := kubectl(
                "get", "ceval", "deep", "-n", namespace, "-o", f"jsonpath={jsonpath}", check=False
            )
        ) != "4 True":
            operator.assert_running()
            assert time.monotonic() < deadline, f"deep eval: {state!r}\n{operator.log_tail()}"
            time.sleep(1.0)
        operator.assert_running()
        assert http_get(metrics_port(operator), "/healthz") == (200, "ok")
    finally:
        shutdown(operator, kubectl, namespace)
