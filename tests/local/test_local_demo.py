"""The bundled demo (the README's first command) gives its documented answers."""

from __future__ import annotations

import json
from pathlib import Path

from tests.local.local_helpers import passhat

DEMO = Path(__file__).resolve().parents[2] / "examples" / "local" / "eval.yaml"


def test_demo_numbers_and_metrics_textfile(tmp_path: Path) -> None:
    """examples/local/eval.yaml: the numbers of examples/local/README.md, exit 0, metrics."""
    metrics = tmp_path / "passhat.prom"
    proc = passhat(
        "run",
        DEMO,
        "--out",
        tmp_path / "out",
        "--format",
        "json",
        "--metrics-textfile",
        metrics,
    )
    assert proc.returncode == 0, proc.stderr
    by_k = {s["k"]: s for s in json.loads(proc.stdout)}
    assert sorted(by_k) == [1, 3, 8]
    assert abs(by_k[1]["mean_pass_rate"] - 0.65) < 1e-9
    assert abs(by_k[3]["pass_hat_k"] - 0.48571428571428577) < 1e-9
    assert abs(by_k[3]["pass_at_k"] - 0.7857142857142858) < 1e-9
    assert abs(by_k[8]["pass_hat_k"] - 0.4) < 1e-9
    assert by_k[1]["flaky"] == ["address-change", "refund-over-limit"]
    assert abs(by_k[1]["infra_error_rate"] - 1 / 41) < 1e-9
    text = metrics.read_text()
    assert 'passhat_pass_hat_k{eval="local-demo",k="3",namespace="local"}' in text
    assert (
        'passhat_trials_total{eval="local-demo",namespace="local",outcome="infra_error",'
        'reason="reported"} 1.0' in text
    )
    assert 'passhat_gate_passed{eval="local-demo",namespace="local"} 1.0' in text


def test_demo_text_report(tmp_path: Path) -> None:
    """The default text report names the flaky tasks."""
    proc = passhat("run", DEMO, "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert "address-change" in proc.stdout and "refund-over-limit" in proc.stdout
