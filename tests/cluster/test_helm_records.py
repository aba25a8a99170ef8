"""The chart's embedded record store works on a cluster with no bucket: a claim mounted by
the operator pod, the records on the volume, read back through the records API.

This cluster has no storage provisioner, so the test makes the volume a cluster admin
would have: a static hostPath PersistentVolume of a StorageClass name the release's claim
asks for. The operator (uid 65532, read-only root) writes its records there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.cluster.helm_helpers import (
    ensure_image,
    example_eval,
    installed_release,
    wait_complete,
)

OPERATOR_UID = 65532


def test_the_embedded_store_keeps_every_attempt_on_a_volume(
    cluster: Any, kubectl: Callable[..., str], tmp_path: Path
) -> None:
    """records.store=pvc (the default): the claim binds, the operator archives a one-task
    eval's attempts onto the volume, and `passhat trials` reads them back."""
    ensure_image(cluster.env())
    suffix = uuid.uuid4().hex[:6]
    storage_class = f"passhat-test-{suffix}"
    volume_dir = Path(f"/var/tmp/passhat-records-{suffix}")
    volume_dir.mkdir(parents=True)
    os.chown(volume_dir, OPERATOR_UID, OPERATOR_UID)
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": storage_class, "labels": {"passhat.dev/test": "true"}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": str(volume_dir), "type": "Directory"},
        },
    }
    kubectl("apply", "-f", "-", input=json.dumps(pv))
    try:
        with installed_release(
            cluster.env(),
            kubectl,
            "records.store=pvc",
            f"records.pvc.storageClass={storage_class}",
            "records.pvc.size=1Gi",
        ) as release:
            ns = release.evals_namespace
            kubectl("apply", "-n", ns, "-f", "-", input=example_eval("on-a-volume", 2))
            status = wait_complete(kubectl, ns, "on-a-volume")
            uid = json.loads(kubectl("get", "ceval", "on-a-volume", "-n", ns, "-o", "json"))[
                "metadata"
            ]["uid"]
            base = volume_dir / ns / "on-a-volume" / uid
            records = sorted((base / "attempts").rglob("*.json"))
            assert len(records) == status["progress"]["done"] == 2
            assert json.loads((base / "eval.json").read_text())["taskIds"]
            out = subprocess.run(
                [sys.executable, "-m", "passhat", "trials", "on-a-volume", "-n", ns],
                capture_output=True,
                text=True,
                env=cluster.env(),
                timeout=120,
                check=False,
            )
            assert out.returncode == 0, out.stderr
            assert len(out.stdout.splitlines()) == 2
            claim = json.loads(
                kubectl("get", "pvc", f"{release.fullname}-records", "-n", release.namespace,
                        "-o", "json")
            )  # fmt: skip
            assert claim["status"]["phase"] == "Bound"
    finally:
        kubectl("delete", "pv", storage_class, "--wait=false", check=False)
        shutil.rmtree(volume_dir, ignore_errors=True)
