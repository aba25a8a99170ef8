"""Which pods the operator made: a creation mark a tenant cannot forge.

Everything else on a trial pod is set by whoever creates it: a tenant who may create pods
in an eval's namespace can copy its labels, its controller owner reference (the eval's uid
is readable), our finalizer, and take a trial's predictable name first. So the operator
marks each pod it creates with an HMAC of (namespace, pod name, eval uid) under a key only
it holds (a file: the chart mounts it from a Secret the operator's RBAC cannot read), in
the annotation `passhat.dev/created-by`. A pod is the operator's when its controller owner
reference names the eval and the mark verifies; only such pods are counted, kept, released
or deleted (loop, kube, handlers). docs/security.md says what this does not cover: a mark
copied from a deleted pod of the same name (only after its attempt is recorded), and pods
of a lost key.

Why not the Job controller's way (controller reference + in-memory expectations): the
Job controller trusts the controller reference, because whoever can forge one could create
the pods anyway. Here a tenant sharing the namespace would make another author's eval
count a pass it never ran, and make the operator delete pods with its own rights.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from passhat.operator.pods import eval_owner

__all__ = [
    "ANNOTATION_CREATED_BY",
    "MIN_KEY_BYTES",
    "PROCESS_KEY",
    "PodSigner",
    "default_key_file",
    "load_pod_key",
]

logger = logging.getLogger(__name__)

# The operator's creation mark on each pod it creates (see the module docstring).
ANNOTATION_CREATED_BY = "passhat.dev/created-by"
# The mark's version prefix (a new scheme gets a new prefix; old marks stay readable).
_SCHEME = "v1:"
# Shortest key accepted (the chart makes 64 random characters).
MIN_KEY_BYTES = 32
# The key of a process whose config names none (tests, one process): random, never stored.
PROCESS_KEY = secrets.token_bytes(32)
# Marks a signer keeps (about 300 bytes each): more than the pods a pass lists at the
# chart's largest parallelism, so the cache is cleared only every few passes.
_MARKS_CACHED = 8192


class PodSigner:
    """Marks the pods the operator creates and recognises them again."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        # (namespace, name, eval uid) -> mark: every pass checks every listed pod's mark
        # again, and at 2,000 pods in flight the HMACs were ~4 % of a pass's CPU
        # (bench/pass_cost.py). A pure function of its key, so a cached mark is the mark.
        self._marks: dict[tuple[str, str, str], str] = {}

    def mark(self, namespace: str, name: str, eval_uid: str) -> str:
        """The mark of pod `namespace/name` made for eval `eval_uid`."""
        key = (namespace, name, eval_uid)
        mark = self._marks.get(key)
        if mark is None:
            message = f"{namespace}/{name}/{eval_uid}".encode()
            mark = _SCHEME + hmac.new(self._key, message, hashlib.sha256).hexdigest()
            if len(self._marks) >= _MARKS_CACHED:
                self._marks.clear()  # NB: bounded; the pods in flight come back next pass
            self._marks[key] = mark
        return mark

    def sign(self, pod: dict[str, Any]) -> dict[str, Any]:
        """`pod` (built by `build_pod`) with its mark added; the template cannot set it."""
        meta = pod["metadata"]
        annotations = meta.setdefault("annotations", {})
        uid = str(meta["ownerReferences"][0]["uid"])
        annotations[ANNOTATION_CREATED_BY] = self.mark(meta["namespace"], meta["name"], uid)
        return pod

    def owner_uid(self, pod: Mapping[str, Any]) -> str | None:
        """The uid of the eval the operator made `pod` for; None when it did not make it:
        the pod's controller owner reference names the eval, and the mark verifies for
        (namespace, name, that uid). Labels play no part (a user may change them)."""
        meta = pod.get("metadata")
        if not isinstance(meta, Mapping):
            return None
        annotations = meta.get("annotations")
        given = annotations.get(ANNOTATION_CREATED_BY) if isinstance(annotations, Mapping) else None
        if not isinstance(given, str):
            return None
        refs = meta.get("ownerReferences")
        for ref in refs if isinstance(refs, list) else []:
            uid = ref.get("uid") if isinstance(ref, Mapping) else None
            if isinstance(uid, str) and uid and eval_owner(meta, uid) is not None:
                expected = self.mark(str(meta.get("namespace")), str(meta.get("name")), uid)
                return uid if hmac.compare_digest(given, expected) else None
        return None

    def owns(self, pod: Mapping[str, Any], eval_uid: str) -> bool:
        """Whether the operator made `pod` for eval `eval_uid`."""
        return self.owner_uid(pod) == eval_uid


def default_key_file() -> Path:
    """Where `passhat operator` keeps its key when no file is named:
    $XDG_STATE_HOME/passhat/pod-key (~/.local/state/passhat/pod-key)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "passhat" / "pod-key"


def load_pod_key(path: str | os.PathLike[str] | None) -> bytes:
    """The key in file `path` (surrounding whitespace dropped; at least MIN_KEY_BYTES).

    Without `path`, the key in `default_key_file()`, made (random, mode 0600) when absent:
    a local operator keeps recognising its pods across restarts. A key that changes while
    evals run strands their pods (docs/security.md).
    """
    if path is None:
        path = default_key_file()
        if not path.exists():
            _create_key_file(path)
    key = Path(path).read_bytes().strip()
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(
            f"{path}: the pod key has {len(key)} bytes; at least {MIN_KEY_BYTES} are needed "
            "(the chart makes one; or: head -c 48 /dev/urandom | base64 > FILE)"
        )
    return key


def _create_key_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fresh = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_urlsafe(48) + "\n")
    try:
        os.link(fresh, path)  # NB: never replaces a key another process made meanwhile
    except FileExistsError:
        pass
    else:
        logger.info("made a new pod key in %s", path)
    finally:
        fresh.unlink()
