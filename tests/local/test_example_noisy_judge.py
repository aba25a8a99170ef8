"""examples/noisy-judge: the noise rate its README states, from a real run and regrade."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.local.local_helpers import passhat

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "noisy-judge"


def _readme_output() -> str:
    """The README's console output of `passhat regrade /tmp/noisy --times 3`."""
    readme = (EXAMPLE / "README.md").read_text()
    block = re.search(r"\$ passhat regrade /tmp/noisy --times 3\n(.*?)```", readme, re.S)
    assert block is not None, "the README lost its regrade example"
    return block.group(1)


def test_the_noisy_judge_gives_the_stated_noise_rate(tmp_path: Path) -> None:
    """Run the example, regrade with its spec grader: the README's report, line for line;
    the noisy transcripts are exactly summarize-thread's 4, the infra attempt not sampled."""
    out = tmp_path / "noisy"
    run = passhat("run", EXAMPLE / "eval.yaml", "--out", out, "--format", "json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)[0]["flaky"] == ["refund-policy", "summarize-thread"]
    text = passhat("regrade", out, "--times", "3")
    assert text.returncode == 0, text.stderr
    assert text.stdout.replace(str(out), "/tmp/noisy") == _readme_output()
    done = passhat("regrade", out, "--times", "3", "--format", "json")
    report = json.loads(done.stdout)
    assert report["noise_rate"] == 0.25 and report["infra_attempts_skipped"] == 1
    assert [(n["task_id"], n["trial"]) for n in report["noisy"]] == [
        ("summarize-thread", trial) for trial in range(4)
    ]
    low, high = report["noise_rate_interval"]
    assert low < 0.1875 < high  # the expected rate is inside the interval


def _checked_eval(tmp_path: Path, **check: object) -> Path:
    """The example with a gate its agent passes, and spec.grading.stabilityCheck."""
    import yaml

    body = yaml.safe_load((EXAMPLE / "eval.yaml").read_text())
    body["spec"]["gate"] = {"metric": "meanPassRate", "k": 1, "min": 0.5}
    if check:
        body["spec"]["grading"]["stabilityCheck"] = {"sample": 16, "times": 3, **check}
    path = tmp_path / f"eval-{len(check)}-{check.get('maxNoiseRate')}.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def test_the_stability_check_fails_the_gate_on_the_noisy_judge(tmp_path: Path) -> None:
    """`passhat run` with spec.grading.stabilityCheck regrades after the trials with the
    grader command: the judge noisy on exactly summarize-thread's transcripts gives the
    stated noise rate (0.25: its 4 of 16), names them, and the gate that passes without
    the check fails with it (exit 1); a maxNoiseRate above 0.25 passes it again."""
    plain = passhat("run", _checked_eval(tmp_path), "--out", tmp_path / "plain")
    assert plain.returncode == 0, plain.stderr
    assert "gate passed" in plain.stderr

    out = tmp_path / "checked"
    run = passhat("run", _checked_eval(tmp_path, maxNoiseRate=0.1), "--out", out)
    assert run.returncode == 1, run.stderr
    assert "passhat: grader NOT stable: noise rate 0.250, max 0.1" in run.stderr
    assert "gate FAILED" in run.stderr and "the grader must be stable" in run.stderr
    assert "summarize-thread: 2 of 4 graded attempts passed; 4 of 4 regraded" in run.stderr
    report = json.loads((out / "grader-check.json").read_text())
    assert report["noise_rate"] == 0.25 and report["stable"] is False
    assert report["infra_attempts_skipped"] == 1 and report["transcripts"] == 16
    assert [(n["task_id"], n["trial"]) for n in report["noisy"]] == [
        ("summarize-thread", trial) for trial in range(4)
    ]

    lenient = passhat("run", _checked_eval(tmp_path, maxNoiseRate=0.3), "--out", tmp_path / "ok")
    assert lenient.returncode == 0, lenient.stderr
    assert "passhat: grader stable: noise rate 0.250, max 0.3" in lenient.stderr


def test_a_hanging_grader_fails_the_stability_check_within_its_timeout(tmp_path: Path) -> None:
    """A grader that hangs is killed at the check's timeoutSeconds: every grading is a
    grader error, the check cannot judge the grader stable, and the gate fails."""
    import time

    import yaml

    path = _checked_eval(tmp_path, maxNoiseRate=0.5, timeoutSeconds=1, sample=2, times=2)
    body = yaml.safe_load(path.read_text())
    body["spec"]["grading"]["grader"]["command"] = ["sh", "-c", "sleep 60; exit 0"]
    path.write_text(yaml.safe_dump(body))
    started = time.monotonic()
    run = passhat("run", path, "--out", tmp_path / "hang")
    assert time.monotonic() - started < 30
    assert run.returncode == 1, run.stderr
    assert "the grader broke on all 4 gradings: the grader timed out after 1 s" in run.stderr
    assert "gate FAILED" in run.stderr
    report = json.loads((tmp_path / "hang" / "grader-check.json").read_text())
    assert report["stable"] is False
