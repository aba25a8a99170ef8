"""A tenant who may write Leases in their own namespace forges the operator's claim there;
the operator keeps serving every other namespace.

On the real API server with the operator as a process (namespaced mode, leader election
on a Lease): mallory (impersonated) may get, create and update Leases in `team-a` and
nothing else. Once the operator leads and holds both claims, mallory overwrites team-a's
claim (`passhat-operator`) with herself as holder for 68 years. Before session 14 the
operator exited at its next renew (and, restarted, stood by forever): every namespace lost
it. Now it keeps running, an eval in team-b completes, and the eval in team-a is not
served (an Event on it names the holder) until the claim is free again.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from kubernetes import client

from tests.cluster.conftest import Cluster, fresh_namespace, wait_for
from tests.cluster.kube_helpers import grant
from tests.cluster.operator_helpers import (
    OperatorProcess,
    create_eval,
    delete_evals,
    eval_manifest,
    get_eval,
    install_crd,
    wait_for_condition,
)

MALLORY = "mallory@example.com"
CLAIM = "passhat-operator"
FOREVER = 2**31 - 1
# Short timings: a renew every second, so the old exit came within seconds.
TIMINGS = ["--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1"]


def grant_leases(kubectl: Callable[..., str], namespace: str, user: str) -> None:
    """`user` may get, create and update Leases in `namespace`, and nothing else."""
    rule = {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "create", "update", "patch"],
    }
    grant(kubectl, namespace, user, name="leases", rules=[rule])


def kubectl_as(cluster: Cluster, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(cluster.bin / "kubectl"), "--as", user, *args],
        capture_output=True,
        text=True,
        env=cluster.env(),
        timeout=120,
        check=False,
    )


def claim_holder(kubectl: Callable[..., str], namespace: str) -> str:
    out = kubectl("get", "lease", CLAIM, "-n", namespace, "-o", "json", check=False)
    try:
        return str((json.loads(out).get("spec") or {}).get("holderIdentity") or "")
    except ValueError:
        return ""


@contextlib.contextmanager
def two_namespaces(cluster: Cluster, core: client.CoreV1Api) -> Iterator[tuple[str, str]]:
    suffix = str(int(time.time()) % 100000)
    with (
        fresh_namespace(core, f"claims-a-{suffix}") as team_a,
        fresh_namespace(core, f"claims-b-{suffix}") as team_b,
    ):
        yield team_a, team_b


def events_of(kubectl: Callable[..., str], namespace: str) -> str:
    return kubectl("get", "events", "-n", namespace, "-o", "json", check=False)


def test_a_forged_claim_costs_its_namespace_only(
    cluster: Cluster,
    kubectl: Callable[..., str],
    core_v1: client.CoreV1Api,
    api_client: client.ApiClient,
    tmp_path: Path,
) -> None:
    """mallory forges team-a's claim while the operator leads: the operator keeps running
    and renewing, team-b's eval completes, team-a's eval is not served."""
    install_crd(kubectl)
    with two_namespaces(cluster, core_v1) as (team_a, team_b):
        grant_leases(kubectl, team_a, MALLORY)
        release = f"{team_b}/passhat-test"
        process = OperatorProcess(
            kubeconfig=cluster.kubeconfig,
            namespaces=[team_a, team_b],
            log_path=tmp_path / "operator.log",
            extra_args=["--lease", release, "--identity", "op-1", *TIMINGS],
        )
        process.start()
        try:
            wait_for(
                lambda: (
                    claim_holder(kubectl, team_a) == release
                    and claim_holder(kubectl, team_b) == release
                ),
                120,
                "the operator to claim both namespaces",
            )
            spec = {"holderIdentity": "mallory", "leaseDurationSeconds": FOREVER}
            forged = kubectl_as(
                cluster,
                MALLORY,
                "-n",
                team_a,
                "patch",
                "lease",
                CLAIM,
                "--type=merge",
                "-p",
                json.dumps({"spec": spec}),
            )
            assert forged.returncode == 0, forged.stderr
            time.sleep(10)  # NB: ten renew periods; the old operator exited at the first
            process.assert_running()
            assert claim_holder(kubectl, team_a) == "mallory"
            assert claim_holder(kubectl, team_b) == release

            manifest = eval_manifest("small", tasks=2, trials=2, parallelism=4, scripted=False)
            create_eval(api_client, team_a, {**manifest, "metadata": {"name": "waits"}})
            create_eval(api_client, team_b, manifest)
            wait_for_condition(
                api_client, team_b, "small", "Complete", timeout=240, operator=process
            )
            process.assert_running()
            waiting = get_eval(api_client, team_a, "waits") or {}
            assert "ledger" not in (waiting.get("status") or {}), waiting.get("status")
            wait_for(
                lambda: "mallory" in events_of(kubectl, team_a),
                60,
                "an event on team-a's eval naming the claim's holder",
            )
        finally:
            if process.proc is not None and process.proc.poll() is None:
                delete_evals(kubectl, team_b)
                # NB: team-a's eval holds kopf's finalizer only once served; strip it
                delete_evals(kubectl, team_a, timeout_s=20)
            process.stop()
