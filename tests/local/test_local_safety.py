"""A template the operator would refuse runs locally, with one warning line per problem."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.local.local_helpers import eval_doc

NOTE = (
    "(the operator refuses this unless the cluster admin grants the namespace privileged "
    "trials; ignored locally)"
)


def test_privileged_template_warns_even_with_quiet(run_eval: Callable[..., Any]) -> None:
    """hostNetwork + privileged: two warnings on stderr with -q, the run and exit code as usual."""
    doc = eval_doc("exit 0", tasks=["a"], trials=2)
    template = doc["spec"]["trial"]["template"]
    template["spec"]["hostNetwork"] = True
    template["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    proc, out = run_eval(doc, "-q", name="priv")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["mean_pass_rate"] == 1.0
    base = "spec.trial.template.spec"
    path = out.parent / "priv.yaml"
    warnings = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert warnings == [
        f"passhat: warning: {path}: {base}.hostNetwork: host namespaces are not allowed {NOTE}",
        f"passhat: warning: {path}: {base}.containers[0].securityContext.privileged: "
        f"privileged is not allowed {NOTE}",
    ]


def test_safe_template_has_no_warning(run_eval: Callable[..., Any]) -> None:
    """An ordinary template prints no warning."""
    proc, _ = run_eval(eval_doc("exit 0", tasks=["a"], trials=1), "-q")
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr
