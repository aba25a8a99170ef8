"""A real Prometheus for the cluster tests: Debian's `prometheus` on a free loopback port.

Shared by `test_prometheus_scrape.py` (it scrapes the helm-installed operator pod) and
`test_suite_trend.py` (an operator process): `run_prometheus(scrape_configs, workdir)`
starts one with a 1 s scrape and evaluation interval and yields its URL; `get_json`,
`poll` and `free_port` are what the tests query it with.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

__all__ = ["free_port", "get_json", "poll", "prometheus_binary", "run_prometheus"]


def get_json(url: str) -> dict[str, Any]:
    """GET a JSON document (errors in the body are the caller's to check)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        body: dict[str, Any] = json.loads(response.read())
        return body


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def poll(pred: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll `pred` until truthy; fail naming `what` (and the last exception) on timeout."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = pred()
            if value:
                return value
        except OSError as err:
            last = err
        time.sleep(1)
    pytest.fail(
        f"timed out after {timeout:.0f}s waiting for {what}" + (f": {last}" if last else "")
    )


def prometheus_binary() -> str:
    """The `prometheus` on PATH; fails the test when there is none."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("no prometheus binary: apt-get install prometheus (hack/cluster/up.sh does)")
    return binary


@contextlib.contextmanager
def run_prometheus(
    scrape_configs: list[dict[str, Any]], workdir: Path, *, rule_files: Sequence[str] = ()
) -> Iterator[str]:
    """A Prometheus scraping `scrape_configs` every second (with `rule_files`), its data
    and log in `workdir`; yields its URL once it answers, stops it afterwards."""
    binary = prometheus_binary()
    config: dict[str, Any] = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": scrape_configs,
    }
    if rule_files:
        config["rule_files"] = list(rule_files)
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (workdir / "prometheus.log").open("w") as log:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        poll(lambda: proc.poll() is None and get_json(f"{url}/api/v1/status/buildinfo"),
             120, "prometheus to start")  # fmt: skip
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
