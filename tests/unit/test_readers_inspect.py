"""Inspect logs as inspect-ai 0.3.285 writes them (tests/fixtures/inspect/make_logs.py).

Each expected number is computed here from the plan the fixture's solver followed
(tests/fixtures/inspect/tasks.py, copied below), not read back from passhat.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from passhat.api.errors import InputError
from passhat.stats import summarize
from passhat.trials.outcomes import Outcome
from passhat.trials.readers import ReadOptions, read_rows, read_tallies, read_trials

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "inspect"

# the plans of tasks.py: sample -> epochs (1-based) answered right
FLAKY = {"always": {1, 2, 3, 4}, "never": set(), "half": {1, 3}, "mostly": {1, 2, 4}}
ALPHA = {"1": {1, 2}, "2": set(), "3": {1}}
BETA = {"1": set(), "2": {1, 2}, "3": {1, 2}}


def _counts(plan: dict[str, set[int]], epochs: int) -> dict[str, tuple[int, int, int]]:
    return {task: (len(right), epochs, 0) for task, right in plan.items()}


def _tallies(paths: list[Path], **options: str) -> dict[str, tuple[int, int, int]]:
    tallies = read_tallies(paths, options=ReadOptions(**options), warn=lambda _: None)  # type: ignore[arg-type]
    return {t.task_id: (t.passed, t.graded, t.infra_errors) for t in tallies}


def test_eval_log_is_read_natively() -> None:
    """The default `.eval` (a zip of zstd members) reads like its JSON conversion."""
    assert _tallies([LOGS / "flaky.eval"]) == _counts(FLAKY, 4)
    eval_rows = read_trials(LOGS / "flaky.eval")
    json_rows = read_trials(LOGS / "flaky.json")
    assert sorted((r.task_id, r.trial or 0, r.outcome.value) for r in eval_rows) == sorted(
        (r.task_id, r.trial or 0, r.outcome.value) for r in json_rows
    )
    assert len(eval_rows) == 16


def test_eval_pass_hat_k_matches_the_plan() -> None:
    """pass^4 over the flaky task: only `always` passes every epoch; pass^2 by hand."""
    tallies = read_tallies([LOGS / "flaky.eval"])
    assert summarize(tallies, 4).pass_hat_k == pytest.approx(1 / 4)
    by_hand = sum(math.comb(len(r), 2) / math.comb(4, 2) for r in FLAKY.values()) / 4
    assert summarize(tallies, 2).pass_hat_k == pytest.approx(by_hand)


def test_eval_member_read_one_at_a_time_without_inspect() -> None:
    """No inspect-ai import: the reader runs where only passhat is installed."""
    code = (
        "import sys; from passhat.trials.readers import read_trials; "
        f"rows = read_trials({str(LOGS / 'flaky.eval')!r}); "
        "assert 'inspect_ai' not in sys.modules; print(len(rows))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "16"


def test_two_tasks_with_the_same_sample_ids_stay_apart() -> None:
    """Inspect numbers samples 1..n in every task: the task name keys them apart."""
    expected = {f"alpha/{t}": c for t, c in _counts(ALPHA, 2).items()}
    expected |= {f"beta/{t}": c for t, c in _counts(BETA, 2).items()}
    assert _tallies([LOGS / "alpha.eval", LOGS / "beta.eval"]) == expected


def test_one_task_keeps_bare_sample_ids() -> None:
    """With one task in the inputs, the task ids are the sample ids, as before."""
    assert _tallies([LOGS / "alpha.eval"]) == _counts(ALPHA, 2)


def test_the_same_log_twice_counts_once(tmp_path: Path) -> None:
    """The same log given twice (or copied under another name) is one set of trials."""
    copy = tmp_path / "copy.eval"
    shutil.copyfile(LOGS / "flaky.eval", copy)
    assert _tallies([LOGS / "flaky.eval", copy]) == _counts(FLAKY, 4)
    assert _tallies([LOGS / "flaky.eval", LOGS / "flaky.json"]) == _counts(FLAKY, 4)


def test_aborted_log_warns_with_what_it_lacks() -> None:
    """status error: a warning names the file and counts what is missing; errors are infra."""
    warnings: list[str] = []
    rows = read_trials(LOGS / "crashy-aborted.eval", warn=warnings.append)
    graded = sum(r.outcome is not Outcome.INFRA_ERROR for r in rows)
    assert len(warnings) == 1
    (warning,) = warnings
    assert "crashy-aborted.eval" in warning
    assert "status is 'error'" in warning
    assert f"lacks {6 - graded} of its 6 samples x epochs" in warning
    # sample b epoch 2 raised; a, b, c epoch 1 and a epoch 2 finished before the abort
    assert graded == 4


def test_aborted_log_and_its_retry_count_each_sample_epoch_once() -> None:
    """eval-retry copies the finished samples: with both logs, each sample x epoch once,
    the retried error replaced by its graded rerun."""
    both = _tallies([LOGS / "crashy-aborted.eval", LOGS / "crashy-retried.eval"])
    # the solver answers right for a and b, wrong for c (tasks.py: crashing)
    assert both == {"a": (2, 2, 0), "b": (2, 2, 0), "c": (0, 2, 0)}
    assert both == _tallies([LOGS / "crashy-retried.eval"])


def test_finished_log_warns_nothing() -> None:
    """A successful log, even with a sample error, says nothing on the side."""
    warnings: list[str] = []
    rows = read_trials(LOGS / "crashy-tolerated.eval", warn=warnings.append)
    assert warnings == []
    assert [(r.task_id, r.trial) for r in rows if r.outcome is Outcome.INFRA_ERROR] == [("b", 1)]


def test_scorer_option_picks_the_scorer() -> None:
    """The first scorer (match) by default, as Inspect's headline; --scorer includes."""
    # answers per epoch: end "42","42"; start "42 it is" twice; none "41","42"
    assert _tallies([LOGS / "two_scorers.eval"]) == {
        "end": (2, 2, 0),
        "start": (0, 2, 0),
        "none": (1, 2, 0),
    }
    assert _tallies([LOGS / "two_scorers.eval"], scorer="includes") == {
        "end": (2, 2, 0),
        "start": (2, 2, 0),
        "none": (1, 2, 0),
    }
    with pytest.raises(InputError, match=r"two_scorers\.eval: no scorer 'exact' in this"):
        read_trials(LOGS / "two_scorers.eval", options=ReadOptions(scorer="exact"))


def test_numeric_scores_pass_at_one_within_tolerance() -> None:
    """Numbers as Inspect's value_to_float reads them; >= 1 - 1e-6 passes, P (0.5) fails."""
    values = {"one": 1.0, "nearly": 0.9999995, "close": 0.99, "two": 2.0, "partial": 0.5}
    expected = {t: (int(v >= 1 - 1e-6), 1, 0) for t, v in values.items()}
    assert _tallies([LOGS / "numeric.eval"]) == expected


def test_mean_pass_rate_is_inspects_accuracy() -> None:
    """With C/I scores the mean pass rate equals the accuracy Inspect printed in the log."""
    log = json.loads((LOGS / "flaky.json").read_text())
    accuracy = log["results"]["scores"][0]["metrics"]["accuracy"]["value"]
    assert summarize(read_tallies([LOGS / "flaky.json"]), 1).mean_pass_rate == pytest.approx(
        accuracy
    )


def test_truncated_eval_says_cut_short(tmp_path: Path) -> None:
    """A .eval cut anywhere (a copy taken while Inspect wrote it) says it is cut short."""
    data = (LOGS / "flaky.eval").read_bytes()
    for size in (len(data) // 3, len(data) - 30):
        cut = tmp_path / f"cut{size}.eval"
        cut.write_bytes(data[:size])
        with pytest.raises(InputError, match=rf"cut{size}\.eval: cut short"):
            read_trials(cut)


def test_corrupt_eval_member_names_file_and_member(tmp_path: Path) -> None:
    """A damaged member is an InputError naming the file and the member, not a traceback."""
    data = bytearray((LOGS / "flaky.eval").read_bytes())
    start = data.index(b"samples/always_epoch_1.json") + len("samples/always_epoch_1.json")
    for offset in range(start + 10, start + 60):
        data[offset] ^= 0xFF
    bad = tmp_path / "bad.eval"
    bad.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"bad\.eval: member samples/always_epoch_1\.json: "):
        read_trials(bad)


def test_rows_keep_the_task_name_as_suite() -> None:
    """Each Inspect row carries its task name, what tells two tasks apart."""
    assert {r.suite for r in read_rows([LOGS / "alpha.eval"])} == {"alpha"}


def test_killed_run_warns_it_never_finished() -> None:
    """A run SIGKILLed mid-way (no header.json, only the start journal): its samples are
    read, and the warning says the status was never written and how many never ran."""
    path = LOGS / "killed.eval"
    written = sum(name.startswith("samples/") for name in zipfile.ZipFile(path).namelist())
    warnings: list[str] = []
    rows = read_trials(path, warn=warnings.append)
    assert len(rows) == written
    (warning,) = warnings
    assert "status is 'started'" in warning
    assert f"lacks {60 - written} of its 60 samples x epochs" in warning
    assert f"{60 - written} never ran" in warning


def _members(path: Path) -> list[tuple[str, bytes]]:
    """Each member of a real .eval, decompressed here with zstandard directly."""
    import zstandard

    out = []
    with zipfile.ZipFile(path) as log, path.open("rb") as raw:
        for info in log.infolist():
            raw.seek(info.header_offset + 26)
            skip = int.from_bytes(raw.read(2), "little") + int.from_bytes(raw.read(2), "little")
            raw.seek(info.header_offset + 30 + skip)
            data = (
                zstandard.ZstdDecompressor()
                .decompressobj()
                .decompress(raw.read(info.compress_size))
            )
            out.append((info.filename, data))
    return out


def test_deflated_eval_reads_alike(tmp_path: Path) -> None:
    """An .eval with deflated members (Inspect before zstd) reads as the zstd one."""
    deflated = tmp_path / "old.eval"
    with zipfile.ZipFile(deflated, "w", compression=zipfile.ZIP_DEFLATED) as log:
        for name, data in _members(LOGS / "flaky.eval"):
            log.writestr(name, data)
    assert _tallies([deflated]) == _counts(FLAKY, 4)


def test_zip_that_is_not_an_inspect_log(tmp_path: Path) -> None:
    """A zip without header.json or the start journal: exit-2 error saying what it lacks."""
    other = tmp_path / "other.eval"
    with zipfile.ZipFile(other, "w") as log:
        log.writestr("readme.txt", "hello")
    with pytest.raises(InputError, match=r"other\.eval: not an Inspect \.eval log: no header"):
        read_trials(other)


def test_member_with_bad_json(tmp_path: Path) -> None:
    """A sample member that is not JSON names the file and the member."""
    bad = tmp_path / "bad.eval"
    with zipfile.ZipFile(bad, "w", compression=zipfile.ZIP_DEFLATED) as log:
        for name, data in _members(LOGS / "flaky.eval"):
            log.writestr(name, b"{not json" if name == "samples/half_epoch_2.json" else data)
    with pytest.raises(InputError, match=r"bad\.eval: member samples/half_epoch_2\.json: bad JSON"):
        read_trials(bad)


def test_log_without_samples_says_why() -> None:
    """A finished log written with --no-log-samples has nothing per sample: exit-2 error
    with the likely cause."""
    with pytest.raises(
        InputError,
        match=r"no-samples\.eval: Inspect log has no samples \(status: "
        r"success\) \(was it run with --no-log-samples\?\)",
    ):
        read_trials(LOGS / "no-samples.eval")
