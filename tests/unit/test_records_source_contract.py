"""The Source contract: a cluster eval and its bundle answer every question alike."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from passhat.operator.records_source import ClusterSource
from passhat.records.bundle import write_bundle
from passhat.records.source import RunDirectory, Source
from tests.unit.records_fake import sample_client


def _cluster(tmp_path: Path) -> Source:
    return ClusterSource(sample_client(), "ns", "ev")


def _bundle(tmp_path: Path) -> Source:
    write_bundle(_cluster(tmp_path), str(tmp_path / "b"), render_html=lambda r, p: "<html>")
    return RunDirectory(str(tmp_path / "b"))


SOURCES = {"cluster": _cluster, "bundle": _bundle}


@pytest.mark.parametrize("kind", SOURCES)
def test_records_transcripts_results_and_spec(kind: str, tmp_path: Path) -> None:
    """Both kinds give the same records, transcripts (None where none was archived),
    result JSON (None where the attempt wrote none) and spec."""
    source = SOURCES[kind](tmp_path)
    expected = sample_client()
    records = source.records()
    assert records == expected._records
    assert source.title
    for record in records:
        key = (record["task_id"], record["trial"], record["attempt"])
        assert source.transcript(record) == expected.transcripts.get(key)
        result = source.result(record)
        assert (result is None) == (record["result"] is None)
        if result is not None:
            assert yaml.safe_load(result) == record["result"]
    spec = yaml.safe_load(source.spec_text() or "")
    assert spec["kind"] == "ConsistencyEval"
    assert spec["spec"] == expected.manifest["spec"]
