"""`passhat operator --records-api-*`: the flags reach the options, and what the records API
needs but lacks is one line and exit 2, before anything listens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from passhat import cli
from passhat.api.errors import UsageError
from passhat.operator import main, records_api
from passhat.operator.records_api import open_records_api
from passhat.records import FileStore
from tests.tls_helpers import make_ca


def test_flags_reach_the_options(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--records-api-port/-cert/-key become OperatorOptions fields (off by default)."""
    seen: list[main.OperatorOptions] = []
    monkeypatch.setattr(main, "run_operator", seen.append)
    argv = ["operator", "--records-api-port", "9443", "--records-api-cert", "c.pem"]
    assert cli.main([*argv, "--records-api-key", "k.pem"]) == 0
    assert cli.main(["operator"]) == 0
    served, default = seen
    assert (served.records_api_port, served.records_api_cert, served.records_api_key) == (
        9443,
        "c.pem",
        "k.pem",
    )
    assert default.records_api_port is None


@pytest.mark.parametrize(
    ("store", "cert", "key", "needle"),
    [
        (None, "c", "k", "needs a records store"),
        ("store", None, "k", "--records-api-cert and --records-api-key"),
        ("store", "c", None, "--records-api-cert and --records-api-key"),
    ],
)
def test_missing_pieces_are_usage_errors(
    tmp_path: Path, store: str | None, cert: str | None, key: str | None, needle: str
) -> None:
    """No store, cert or key: UsageError before the cluster is asked anything."""
    with pytest.raises(UsageError, match=needle):
        open_records_api(
            store=FileStore(str(tmp_path)) if store else None,
            configuration=object(),
            port=0,
            cert_file=cert,
            key_file=key,
        )


def test_cluster_without_request_header_ca_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An API server without the aggregation layer: the records API refuses to start,
    naming the missing flag."""

    class NoAggregation:
        def __init__(self, configuration: Any) -> None:
            pass

        def get_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
            return {"data": {"client-ca-file": "x"}}

    monkeypatch.setattr(records_api, "KubeAccess", NoAggregation)
    with pytest.raises(UsageError, match="--requestheader-client-ca-file"):
        open_records_api(
            store=FileStore(str(tmp_path)),
            configuration=object(),
            port=0,
            cert_file="c",
            key_file="k",
        )


def test_unreadable_cert_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cert path that does not exist: a UsageError naming the flags."""

    class Aggregation:
        def __init__(self, configuration: Any) -> None:
            pass

        def get_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
            return {"data": {"requestheader-client-ca-file": make_ca("x").pem.decode()}}

    monkeypatch.setattr(records_api, "KubeAccess", Aggregation)
    with pytest.raises(UsageError, match="--records-api-"):
        open_records_api(
            store=FileStore(str(tmp_path)),
            configuration=object(),
            port=0,
            cert_file=str(tmp_path / "missing.crt"),
            key_file=str(tmp_path / "missing.key"),
        )
