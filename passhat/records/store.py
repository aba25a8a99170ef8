"""Record stores: where the operator archives attempts, behind one small protocol.

A store maps keys (`a/b/c.json`, laid out by `passhat.records.layout.StoreLayout`) to
bytes. Two implementations pass one contract test (`tests/unit/test_record_store.py`,
and the cluster tier against a real S3 server):

- `FileStore`: a directory (the chart's embedded default, on a PersistentVolumeClaim);
- `S3Store` (`passhat.records.s3`): any S3-compatible bucket, the convention of Argo,
  Kubeflow and Tekton Results.

Every write is whole or absent (a reader never sees half an object), and writing a key
again replaces it: the operator's archive is idempotent per attempt. A store that cannot
answer (down, refusing, full) raises `StoreError`; the operator then holds the attempt's
pod (and so its logs) until the store answers again.

Exception hierarchy: `StoreError(Exception)`, its message says which store and what failed.
"""

from __future__ import annotations

import os
import tempfile
import urllib.parse
from collections.abc import Iterator
from typing import Protocol

__all__ = ["FileStore", "RecordStore", "StoreError", "open_store"]


class StoreError(Exception):
    """The store could not do what was asked (unreachable, refused, full): try again later."""


class RecordStore(Protocol):
    """Bytes under keys; the same contract for a directory and an S3 bucket."""

    def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key`, whole or not at all; an existing object is replaced."""
        ...

    def get(self, key: str) -> bytes | None:
        """The object at `key`; None when there is none."""
        ...

    def exists(self, key: str) -> bool:
        """Whether an object is at `key`."""
        ...

    def list(self, prefix: str) -> Iterator[str]:
        """Every key that starts with `prefix`, in lexical order."""
        ...

    def describe(self) -> str:
        """Where the store is, for messages (never a credential)."""
        ...


class FileStore:
    """A RecordStore in a directory: a key is a path below `root`."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)

    def describe(self) -> str:
        return f"directory {self.root}"

    def _error(self, verb: str, key: str, err: OSError) -> StoreError:
        return StoreError(f"{self.describe()}: cannot {verb} {key}: {err.strerror or err}")

    def _path(self, key: str) -> str:
        parts = key.split("/")
        if not key or key.startswith("/") or any(part in ("", ".", "..") for part in parts):
            raise ValueError(f"not a valid record key: {key!r}")
        return os.path.join(self.root, *parts)

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError as err:
            raise StoreError(
                f"{self.describe()}: cannot write {key}: {err.strerror or err}"
            ) from None

    def get(self, key: str) -> bytes | None:
        try:
            with open(self._path(key), "rb") as handle:
                return handle.read()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as err:
            raise StoreError(
                f"{self.describe()}: cannot read {key}: {err.strerror or err}"
            ) from None

    def exists(self, key: str) -> bool:
        return os.path.isfile(self._path(key))

    def list(self, prefix: str) -> Iterator[str]:
        # NB: walk from the deepest directory the prefix names, then filter by prefix.
        directory = prefix.rpartition("/")[0]
        base = os.path.join(self.root, *directory.split("/")) if directory else self.root
        keys: list[str] = []
        for current, dirs, files in os.walk(base):
            dirs[:] = [name for name in dirs if not name.startswith(".")]
            rel = os.path.relpath(current, self.root)
            stem = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            keys.extend(
                stem + name
                for name in files
                if not name.startswith(".tmp-") and (stem + name).startswith(prefix)
            )
        yield from sorted(keys)


def open_store(url: str, *, endpoint: str | None = None, region: str | None = None) -> RecordStore:
    """The store a URL names: `file:///var/lib/passhat/records` (or a plain path) or
    `s3://BUCKET[/PREFIX]` (credentials from the usual AWS_* environment variables,
    `endpoint` for an S3-compatible server)."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme in ("", "file"):
        return FileStore(parsed.path if parsed.scheme else url)
    if parsed.scheme == "s3":
        from passhat.records.s3 import S3Store

        if not parsed.netloc:
            raise ValueError(f"{url}: an s3:// store needs a bucket (s3://BUCKET/PREFIX)")
        return S3Store(
            bucket=parsed.netloc, prefix=parsed.path.strip("/"), endpoint=endpoint, region=region
        )
    raise ValueError(f"{url}: a records store is file:///PATH or s3://BUCKET/PREFIX")
