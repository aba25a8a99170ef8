"""The trial environment and command: caller variables, $(VAR) expansion, spec errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from passhat.api.errors import SpecError
from passhat.local.capacity import Capacity, Resources, container_resources
from passhat.local.sandbox import base_env, container_command, container_env, expand


def test_base_env_keeps_only_what_a_user_expects() -> None:
    """PATH, locale, TZ and TERM come from the caller; nothing else does."""
    env = base_env(
        {"PATH": "/bin", "LANG": "C", "LC_ALL": "C", "TZ": "UTC", "TERM": "x", "AWS_KEY": "s"}
    )
    assert env == {"PATH": "/bin", "LANG": "C", "LC_ALL": "C", "TZ": "UTC", "TERM": "x"}


def test_expand_follows_kubernetes() -> None:
    """$(VAR) is replaced when known, left when not; $$ is a literal $."""
    env = {"A": "1"}
    assert expand("x$(A)y", env) == "x1y"
    assert expand("$(B)", env) == "$(B)"
    assert expand("$$(A) $$ $((1+1)) $HOME", env) == "$(A) $ $((1+1)) $HOME"


def test_container_env_and_value_from() -> None:
    """env values are strings (expanded in order); valueFrom needs a cluster."""
    container = {"env": [{"name": "A", "value": "x"}, {"name": "B", "value": "$(A)y"}]}
    assert container_env(container, source="e.yaml") == {"A": "x", "B": "xy"}
    with pytest.raises(SpecError) as err:
        container_env({"env": [{"name": "A", "valueFrom": {}}]}, source="e.yaml")
    assert err.value.field == "spec.trial.template.spec.containers[0].env[0].valueFrom"


def test_container_command_resolution(tmp_path: Path) -> None:
    """A bare name is found on PATH, a relative path next to the eval; missing is SpecError."""
    executable, argv = container_command(
        {"command": ["sh"], "args": ["-c", "true"]}, path="/bin:/usr/bin", eval_dir=".", source=None
    )
    assert executable.endswith("/sh") and argv == ["sh", "-c", "true"]
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    executable, _ = container_command(
        {"command": ["./agent.sh"]}, path="", eval_dir=str(tmp_path), source=None
    )
    assert executable == str(script)
    with pytest.raises(SpecError, match="no command"):
        container_command({"args": ["x"]}, path="/bin", eval_dir=".", source=None)


def test_requests_default_to_limits_and_floor_accounting() -> None:
    """A missing request is the limit (as on Kubernetes); the floor admits what fits."""
    requests, limits = container_resources({"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}})
    assert requests == limits == Resources(cpu=1.0, memory=2**30)
    capacity = Capacity(cpu=2.0, memory=3 * 2**30)
    assert capacity.fits(requests)
    capacity.take(requests)
    capacity.take(requests)
    assert not capacity.fits(requests)
    capacity.give(requests)
    assert capacity.fits(requests)
    with pytest.raises(SpecError):
        capacity.check(Resources(cpu=4.0), source=None)
