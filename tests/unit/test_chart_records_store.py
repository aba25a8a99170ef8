"""The chart's record store: the embedded claim by default, S3 with a Secret, or none;
only the operator container ever sees the store or its credentials."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.chart_helpers import CHART, helm
from tests.unit.test_chart_render import RELEASE_NS, by_kind, operator_container, render

S3 = (
    "records.store=s3",
    "records.s3.bucket=evals",
    "records.s3.prefix=team",
    "records.s3.endpoint=http://s3.storage:8333",
    "records.s3.credentialsSecret=s3-creds",
)


def store_args(objects: list[dict[str, Any]]) -> list[str]:
    args = operator_container(objects)["args"]
    return [a for a in args if a.startswith(("--records-store", "--records-s3"))]


def test_default_is_a_kept_claim_mounted_by_the_operator() -> None:
    """Default: a ReadWriteOnce claim kept on uninstall, mounted at the store's path."""
    objects = render()
    (claim,) = by_kind(objects, "PersistentVolumeClaim")
    assert claim["metadata"]["namespace"] == RELEASE_NS
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert store_args(objects) == ["--records-store=file:///var/lib/passhat/records"]
    container = operator_container(objects)
    assert {"name": "records", "mountPath": "/var/lib/passhat/records"} in container["volumeMounts"]
    (deployment,) = by_kind(objects, "Deployment")
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert {
        "name": "records",
        "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]},
    } in volumes
    assert "--set=archive_log_limit_bytes=10485760" in container["args"]


def test_an_existing_claim_is_used_and_none_created() -> None:
    """records.pvc.existingClaim: mounted, no claim rendered."""
    objects = render("records.pvc.existingClaim=mine")
    assert not by_kind(objects, "PersistentVolumeClaim")
    (deployment,) = by_kind(objects, "Deployment")
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert {"name": "records", "persistentVolumeClaim": {"claimName": "mine"}} in volumes


def test_s3_takes_its_credentials_from_a_secret_in_the_operator_only() -> None:
    """records.store=s3: bucket/prefix URL, endpoint, region, the Secret's two keys as env."""
    objects = render(*S3)
    assert not by_kind(objects, "PersistentVolumeClaim")
    assert store_args(objects) == [
        "--records-store=s3://evals/team",
        "--records-s3-endpoint=http://s3.storage:8333",
        "--records-s3-region=us-east-1",
    ]
    env = {e["name"]: e for e in operator_container(objects)["env"]}
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert env[key]["valueFrom"]["secretKeyRef"] == {"name": "s3-creds", "key": key}


def test_none_archives_nothing() -> None:
    """records.store=none: no store argument, no claim."""
    objects = render("records.store=none", "recordsApi.enabled=false")
    assert store_args(objects) == []
    assert not by_kind(objects, "PersistentVolumeClaim")


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (("records.store=s3",), "/records/s3/bucket"),
        (("records.store=s3", "records.s3.bucket=b"), "/records/s3/credentialsSecret"),
        (("records.store=disk",), "/records/store"),
    ],
)
def test_bad_store_values_are_refused_by_the_schema(sets: tuple[str, ...], message: str) -> None:
    """An S3 store without a bucket or Secret, or an unknown store, never renders."""
    args = ["template", "ph", str(CHART), "--namespace", RELEASE_NS]
    for value in sets:
        args += ["--set", value]
    result = helm(*args, check=False)
    assert result.returncode != 0
    assert message in result.stderr
