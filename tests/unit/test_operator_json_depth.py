"""The operator decodes any object the API server stores, however deeply nested.

The API server accepts JSON nested up to 10,000 levels (a task's free-form `params` can be
that deep); Python's json raised RecursionError past about 1,000, and in kopf's watcher
that stopped the whole operator. Each case runs in a child interpreter: the recursion
limit is process-wide, and a stack overflow must fail the test, not kill pytest.
"""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import json, sys, threading
from passhat.operator.main import API_MAX_JSON_DEPTH, allow_api_depth
if sys.argv[1] == "allow":
    allow_api_depth()
depth = API_MAX_JSON_DEPTH + 2  # the deepest object inside a list response
doc = '{"items": [' + '{"a":' * depth + "1" + "}" * depth + "]}"
results = []

def decode():
    try:
        json.dumps(json.loads(doc))
        results.append("ok")
    except RecursionError:
        results.append("RecursionError")

decode()  # the main thread: kopf's watcher
thread = threading.Thread(target=decode)  # a thread: the reconcile passes, the pod watch
thread.start()
thread.join()
print(",".join(results))
"""


def child(mode: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    return proc.stdout.strip()


def test_the_deepest_api_object_decodes_in_the_main_thread_and_in_threads() -> None:
    assert child("allow") == "ok,ok"


def test_without_it_python_cannot() -> None:
    """The premise: with Python's defaults the same document fails."""
    assert child("default") == "RecursionError,RecursionError"
