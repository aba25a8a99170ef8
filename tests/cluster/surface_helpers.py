"""Helpers of the operator-surface cluster tests (malformed evals, real node, report).

A namespace that lives for a whole test module (the malformed suite creates every
resource at once and then checks each one), a clean operator shutdown, predicates that
ride out API server restarts, the operator's metrics port read from its log, and a
Prometheus text scrape of it.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from tests.cluster.conftest import fresh_namespace, wait_for
from tests.cluster.operator_helpers import OperatorProcess, delete_evals

T = TypeVar("T")
_PORT_LINE = re.compile(r"/metrics and /healthz on port (\d+)")


@contextmanager
def module_namespace(
    core: client.CoreV1Api, prefix: str, labels: dict[str, str] | None = None
) -> Iterator[str]:
    """A fresh namespace for a whole module (deleted afterwards, as the `namespace` fixture's)."""
    with fresh_namespace(core, f"t-{prefix}-{uuid.uuid4().hex[:6]}", labels=labels) as name:
        yield name


def shutdown(operator: OperatorProcess, kubectl: Callable[..., str], namespace: str) -> None:
    """Delete the namespace's evals while the operator still runs (it releases their
    pods and finalizers), then stop it; a dead operator's evals lose their finalizers."""
    running = operator.proc is not None and operator.proc.poll() is None
    delete_evals(kubectl, namespace, timeout_s=180 if running else 5)
    operator.stop()


def tolerant(pred: Callable[[], T]) -> Callable[[], T | None]:
    """`pred` that answers None while the API server is unreachable (e.g. restarting)."""

    def call() -> T | None:
        try:
            return pred()
        except (ApiException, urllib3.exceptions.HTTPError, OSError):
            return None

    return call


def metrics_port(operator: OperatorProcess, timeout: float = 120) -> int:
    """The port the operator's /metrics server bound (it logs it once at start)."""

    def found() -> int | None:
        operator.assert_running()
        text = operator.log_path.read_text(errors="replace") if operator.log_path.exists() else ""
        ports = _PORT_LINE.findall(text)
        return int(ports[-1]) if ports else None

    port: int = wait_for(found, timeout, "the operator to log its metrics port")
    return port


def http_get(port: int, path: str) -> tuple[int, str]:
    """GET http://127.0.0.1:port/path: (status, body)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode()


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample on the operator's /metrics: (name, labels) -> value."""
    code, text = http_get(port, "/metrics")
    if code != 200:
        pytest.fail(f"/metrics answered {code}")
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def sample(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float | None:
    """One sample's value by name and exact labels (None when absent)."""
    return samples.get((name, frozenset(labels.items())))
