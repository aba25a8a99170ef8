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
