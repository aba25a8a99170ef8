"""`passhat report NAME --bundle DIR`: a folder every command reads like a run directory."""

from __future__ import annotations

import html.parser
import json
from pathlib import Path
from typing import Any

import pytest

from passhat.api.load import load_eval
from passhat.operator import live
from passhat.trials.ledger import SlotLedger
from passhat.trials.outcomes import Outcome, Verdict
from tests.unit.records_fake import (
    TEMPLATE,
    FakeRecordsClient,
    install,
    jsonl_records,
    one_line_error,
    run,
    sample_client,
)


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hrefs += [value for name, value in attrs if tag == "a" and name == "href" and value]


def links_of(page: str) -> list[str]:
    """Every <a href> of an HTML page."""
    parser = _Links()
    parser.feed(page)
    return parser.hrefs


def fake_live(monkeypatch: pytest.MonkeyPatch, client: FakeRecordsClient) -> None:
    """Make read_live_eval return the eval whose ledger holds the client's final records."""
    records = client._records
    ids = client.manifest["taskIds"]
    ledger = SlotLedger(len(ids), 2)
    for r in records:
        verdict = Verdict(Outcome(r["outcome"]), r["reason"])
        ledger.record(ids.index(r["task_id"]), r["trial"], r["attempt"], verdict, final=r["final"])
    obj: dict[str, Any] = {
        "metadata": {"name": "ev", "namespace": "ns"},
        "spec": {"tasks": [{"id": i} for i in ids], "trials": 2, "trial": {"template": TEMPLATE}},
        "status": {
            "phase": "Succeeded",
            "ledger": ledger.pack(),
            "summary": {"infraErrorsByReason": {"evicted": 1, "oom_killed": 1}},
            "conditions": [{"type": "Complete", "status": "True", "reason": "AllTrialsFinal"}],
        },
    }

    def read(name: str, namespace: str, *, kubeconfig: str | None = None) -> live.LiveEval:
        spec, task_ids, tallies = live.tallies_of(obj, {})
        return live.LiveEval(namespace, name, spec, task_ids, tallies, obj["status"])

    monkeypatch.setattr(live, "read_live_eval", read)


@pytest.fixture
def bundle(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Path:
    """A bundle of the sample eval, written by `passhat report ev -n ns --bundle`."""
    client = sample_client()
    install(monkeypatch, client)
    fake_live(monkeypatch, client)
    dest = tmp_path / "bundle"
    code, out, err = run(
        capsys, "report", "ev", "-n", "ns", "--no-intervals", "--bundle", str(dest)
    )
    assert code == 0, err
    assert "infra errors by reason: evicted 1, oom_killed 1" in out
    assert f"passhat: wrote bundle {dest}: 8 attempts, 7 transcripts, 2 result files" in err
    return dest


def test_bundle_has_the_run_directory_layout(bundle: Path) -> None:
    """trials.jsonl, spec.yaml (a ConsistencyEval), report.html, transcripts/, results/."""
    assert sorted(p.name for p in bundle.iterdir()) == [
        "report.html",
        "results",
        "spec.yaml",
        "transcripts",
        "trials.jsonl",
    ]
    assert len(list((bundle / "transcripts").rglob("*.log"))) == 7
    assert len(list((bundle / "results").rglob("*.json"))) == 2
    evaluation = load_eval(str(bundle / "spec.yaml"))
    assert evaluation.metadata.name == "ev"
    assert jsonl_records((bundle / "trials.jsonl").read_text()) == sample_client()._records


def test_report_links_resolve_to_flaky_transcripts(bundle: Path) -> None:
    """report.html links each flaky task's transcripts (relative) and no other task's."""
    hrefs = links_of((bundle / "report.html").read_text())
    assert hrefs, "no links"
    assert all((bundle / href).is_file() for href in hrefs)
    assert {href.split("/")[1] for href in hrefs} == {
        p.name for p in (bundle / "transcripts").iterdir() if p.name.startswith("flaky")
    }
    assert len(hrefs) == 3


def test_every_command_reads_the_bundle_like_the_eval(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """trials, transcripts and score print for the bundle what they print for the eval."""
    for argv in (["trials"], ["transcripts", "--task", "flaky/one"]):
        code, from_dir, err = run(capsys, argv[0], str(bundle), *argv[1:])
        assert code == 0, err
        code, from_eval, err = run(capsys, argv[0], "ev", "-n", "ns", *argv[1:])
        assert code == 0, err
        assert from_dir == from_eval
    code, score, err = run(capsys, "score", str(bundle / "trials.jsonl"), "--format", "json")
    assert code == 0, err
    code, report, err = run(capsys, "report", "ev", "-n", "ns", "--format", "json")
    assert json.loads(score) == json.loads(report)


def test_regrade_reads_the_bundle_like_the_eval(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """passhat regrade samples and grades the bundle's graded attempts as the eval's: the
    6 graded of 8 (2 infra skipped), 5 with a transcript (steady's trial 1 has none)."""
    argv = ("--grader", "exit 0", "--times", "2", "--format", "json")
    code, from_dir, err = run(capsys, "regrade", str(bundle), *argv)
    assert code == 0, err
    code, from_eval, err = run(capsys, "regrade", "ev", "-n", "ns", *argv)
    assert code == 0, err
    done, expected = json.loads(from_dir), json.loads(from_eval)
    assert done.pop("source") == str(bundle) and expected.pop("source") == "ns/ev"
    assert done == expected
    assert (done["transcripts"], done["missing_transcripts"]) == (5, 1)
    assert (done["graded_attempts"], done["infra_attempts_skipped"]) == (6, 2)


def test_an_earlier_bundle_is_replaced(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Bundling into an earlier bundle works (the archive only grows)."""
    code, _, err = run(
        capsys, "report", "ev", "-n", "ns", "--no-intervals", "--bundle", str(bundle)
    )
    assert code == 0, err


@pytest.mark.parametrize("names", [["notes.txt"], [".passhat.lock", "trials.jsonl"]])
def test_other_directories_are_refused(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    names: list[str],
) -> None:
    """A non-empty directory holding no bundle, or a run directory, is one line, exit 2,
    and nothing in it changes."""
    client = sample_client()
    install(monkeypatch, client)
    fake_live(monkeypatch, client)
    dest = tmp_path / "d"
    dest.mkdir()
    for name in names:
        (dest / name).write_text("x")
    code, out, err = run(capsys, "report", "ev", "-n", "ns", "--bundle", str(dest))
    one_line_error(code, err, str(dest))
    assert out == ""
    assert sorted(p.name for p in dest.iterdir()) == sorted(names)


def test_archive_behind_the_ledger_is_said(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """When the archive holds fewer attempts than the ledger counted, a note says so."""
    client = sample_client()
    fake_live(monkeypatch, client)
    client._records = client._records[:5]
    install(monkeypatch, client)
    argv = ("report", "ev", "-n", "ns", "--no-intervals", "--bundle", str(tmp_path / "b"))
    code, _, err = run(capsys, *argv)
    assert code == 0, err
    assert "the archive holds 5 of the 8 attempts" in err


def test_a_failed_fetch_leaves_no_trials_jsonl(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """When the records API fails midway, the error is one line and the folder has no
    trials.jsonl (it is written last: its presence means the bundle is whole)."""
    from passhat.api.errors import PasshatError

    client = sample_client()
    fake_live(monkeypatch, client)
    install(monkeypatch, client)

    def broken(namespace: str, name: str, *, task_id: str, **_: object) -> bytes:
        if task_id == "broken":
            raise PasshatError("the records API answered 503")
        return b"log\n"

    monkeypatch.setattr(client, "transcript", broken)
    dest = tmp_path / "b"
    code, _, err = run(capsys, "report", "ev", "-n", "ns", "--no-intervals", "--bundle", str(dest))
    one_line_error(code, err, "503")
    assert not (dest / "trials.jsonl").exists()


def test_a_deleted_eval_is_bundled_from_its_archive(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An eval that is gone still bundles: report and bundle come from its archived records,
    and the printed report equals score of the bundle's trials.jsonl."""
    install(monkeypatch, sample_client())

    def gone(name: str, namespace: str, *, kubeconfig: str | None = None) -> live.LiveEval:
        raise live.EvalNotFound(f'consistencyeval "{name}" not found in namespace "{namespace}"')

    monkeypatch.setattr(live, "read_live_eval", gone)
    dest = tmp_path / "b"
    argv = ("report", "ev", "-n", "ns", "--format", "json", "--bundle", str(dest))
    code, report, err = run(capsys, *argv)
    assert code == 0, err
    assert "consistencyeval ns/ev is gone; reporting its archived records (uid 0000-1111)" in err
    assert "the archive holds" not in err
    code, score, err = run(capsys, "score", str(dest / "trials.jsonl"), "--format", "json")
    assert json.loads(report) == json.loads(score)
    assert (dest / "report.html").is_file()
    code, _, err = run(capsys, "report", "ev", "-n", "ns")
    one_line_error(code, err, 'consistencyeval "ev" not found')


def test_a_deleted_evals_exit_code_comes_from_its_archive(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No conditions are left of a deleted eval: every slot final in the archive decides
    the gate on the records (1 here, mean 0.5 < 0.6); a slot without a final record is 3."""

    def gone(name: str, namespace: str, *, kubeconfig: str | None = None) -> live.LiveEval:
        raise live.EvalNotFound(f'consistencyeval "{name}" not found in namespace "{namespace}"')

    monkeypatch.setattr(live, "read_live_eval", gone)
    client = sample_client()
    client.manifest["spec"]["gate"] = {"metric": "meanPassRate", "k": 1, "min": 0.6}
    install(monkeypatch, client)
    argv = ("report", "ev", "-n", "ns", "--no-intervals", "--bundle")
    code, _, err = run(capsys, *argv, str(tmp_path / "b1"))
    assert code == 1, err
    assert "passhat: gate FAILED: meanPassRate at k=1 is 0.5000 (min 0.6)" in err
    client._records.pop()  # broken trial 1's final attempt
    code, _, err = run(capsys, *argv, str(tmp_path / "b2"))
    assert code == 3, err
