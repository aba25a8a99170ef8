"""A real `passhat run`, then `trials`, `transcripts`, `score` and `regrade` on its directory."""

from __future__ import annotations

import html.parser
import json
from pathlib import Path

import pytest

from tests.local.local_helpers import RunEval, eval_doc, passhat, rows, start_passhat

# judged: a result JSON with a reason (the journal's message); flaky: passes odd trials;
# shaky: an infra error (exit 75) on its first attempt of trial 0, retried.
SCRIPT = """
echo "output of $PASSHAT_TASK_ID $PASSHAT_TRIAL-$PASSHAT_ATTEMPT"
case "$PASSHAT_TASK_ID" in
  judged) echo '{"outcome": "pass", "score": 0.9, "reason": "judge says fine"}' \
    > "$PASSHAT_RESULT" ;;
  flaky) exit $(( (PASSHAT_TRIAL + 1) % 2 )) ;;
  shaky) [ "$PASSHAT_TRIAL$PASSHAT_ATTEMPT" = 00 ] && exit 75; exit 0 ;;
esac
"""


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hrefs += [v for k, v in attrs if tag == "a" and k == "href" and v]


@pytest.fixture
def run_dir(run_eval: RunEval) -> Path:
    """A finished run of the three tasks, 3 trials each."""
    doc = eval_doc(SCRIPT, tasks=["judged", "flaky", "shaky"], trials=3)
    done, out = run_eval(doc)
    assert done.returncode == 0, done.stderr
    return out


def test_results_and_messages_are_kept(run_dir: Path) -> None:
    """Each result JSON is in results/<task>/<t>-<a>.json (only where one was written), and
    each journal line carries the classifier's message (a result's reason, the exit code)."""
    results = sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("results/**/*.json"))
    assert results == [f"results/judged/{t}-0.json" for t in range(3)]
    assert json.loads((run_dir / results[0]).read_text())["score"] == 0.9
    judged = [r for r in rows(run_dir) if r["task_id"] == "judged"]
    assert {r["message"] for r in judged} == {"judge says fine"}
    shaky = next(r for r in rows(run_dir) if r["task_id"] == "shaky" and r["attempt"] == 0)
    assert shaky["message"] == "exit code 75"


def test_trials_prints_the_journal(run_dir: Path) -> None:
    """`passhat trials DIR` prints the journal's records and the infra errors by reason."""
    done = passhat("trials", run_dir)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == rows(run_dir)
    assert "10 attempts of 3 tasks" in done.stderr
    assert "infra errors by reason: reported 1" in done.stderr


def test_transcripts_of_a_task(run_dir: Path, tmp_path: Path) -> None:
    """`passhat transcripts DIR --task` prints them; with --out it writes the layout."""
    done = passhat("transcripts", run_dir, "--task", "judged", "--trial", "1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == [
        "==> transcripts/judged/1-0.log (task judged, trial 1, attempt 0: pass, result) <==",
        "output of judged 1-0",
    ]
    assert "==> results/judged/1-0.json <==" in done.stdout
    done = passhat("transcripts", run_dir, "--task", "shaky", "--out", tmp_path / "shaky")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "shaky" / "transcripts" / "shaky").iterdir()) == [
        "0-0.log",
        "0-1.log",
        "1-0.log",
        "2-0.log",
    ]


def test_score_and_regrade_read_the_directory(run_dir: Path) -> None:
    """score of the journal (and of `trials` output) prints what run printed; regrade
    regrades the graded attempts only."""
    ran = json.loads(passhat("score", run_dir / "trials.jsonl", "--k", "1", "--k", "3",
                             "--format", "json").stdout)  # fmt: skip
    exported = run_dir.parent / "exported.jsonl"
    assert passhat("trials", run_dir, "--out", exported).returncode == 0
    done = passhat("score", exported, "--k", "1", "--k", "3", "--format", "json")
    assert json.loads(done.stdout) == ran
    assert ran[0]["flaky"] == ["flaky"]
    done = passhat("regrade", run_dir, "--grader", "exit 0", "--times", "2", "--format", "json")
    assert done.returncode == 0, done.stderr
    regraded = json.loads(done.stdout)
    # NB: 10 attempts, of which shaky's exit 75 was never graded: 9 regraded
    assert (regraded["transcripts"], regraded["infra_attempts_skipped"]) == (9, 1)


def test_report_html_links_the_flaky_task(run_dir: Path) -> None:
    """The run's report.html links each attempt of the flaky task to its transcript."""
    parser = _Links()
    parser.feed((run_dir / "report.html").read_text())
    assert parser.hrefs == [f"transcripts/flaky/{t}-0.log" for t in range(3)]
    assert all((run_dir / href).is_file() for href in parser.hrefs)


def test_resume_drops_a_stale_result(run_eval: RunEval) -> None:
    """An attempt with no journal line runs again on --resume, and a result file left by
    its killed predecessor does not stand for the new attempt, which wrote none."""
    doc = eval_doc("exit 0", tasks=["a"], trials=2)
    done, out = run_eval(doc)
    assert done.returncode == 0, done.stderr
    journal = out / "trials.jsonl"
    first, second = journal.read_text().splitlines()
    journal.write_text(first + "\n")
    lost = json.loads(second)
    stale = out / "results" / "a" / f"{lost['trial']}-{lost['attempt']}.json"
    stale.parent.mkdir(parents=True)
    stale.write_text('{"outcome": "fail"}')
    done, out = run_eval(doc, "--resume")
    assert done.returncode == 0, done.stderr
    assert not stale.exists()
    assert len(rows(out)) == 2


def test_a_reader_that_leaves_ends_the_output_quietly(run_eval: RunEval) -> None:
    """`passhat transcripts ... | head -1` on megabytes of transcript exits 0, no traceback."""
    doc = eval_doc("head -c 2000000 /dev/zero | tr '\\0' x", tasks=["big"], trials=2)
    done, out = run_eval(doc)
    assert done.returncode == 0, done.stderr
    process = start_passhat("transcripts", out, "--task", "big")
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline().startswith("==> transcripts/big/")
    process.stdout.close()
    assert process.wait(timeout=60) == 0
    assert "Traceback" not in process.stderr.read()
    process.stderr.close()
