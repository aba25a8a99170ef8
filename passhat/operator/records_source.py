"""A cluster eval as a records `Source`, and the one place that tells sources apart.

`ClusterSource` reads an eval's archived attempts through the operator's records API
(`passhat.operator.records_client.RecordsClient`): the records and manifest in one call,
each transcript on demand. `open_source(SOURCE)` is where the CLI decides what SOURCE
names: an existing directory (or anything path-like) is a run directory or bundle
(`passhat.records.RunDirectory`), anything else the name of a ConsistencyEval. Every
command after that speaks `passhat.records.source.Source` only.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Protocol

from passhat.api.errors import UsageError
from passhat.records.record import AttemptRecord
from passhat.records.source import RunDirectory, Source

__all__ = ["ClusterSource", "RecordsReader", "cluster_source", "is_eval_name", "open_source"]

# A Kubernetes object name (DNS-1123 subdomain); anything else must be a directory.
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


class RecordsReader(Protocol):
    """What ClusterSource needs of `RecordsClient` (a fake in tests has the same shape)."""

    def records(
        self, namespace: str, name: str, *, uid: str | None = None
    ) -> tuple[dict[str, Any], list[AttemptRecord]]:
        """(manifest, records) of one eval (`uid`: of that one of the evals of this name)."""
        ...

    def transcript(
        self,
        namespace: str,
        name: str,
        *,
        task_id: str,
        trial: int,
        attempt: int,
        uid: str | None = None,
    ) -> bytes | None:
        """One attempt's archived logs, None when there are none."""
        ...


class ClusterSource:
    """A ConsistencyEval's archived attempts, read through the records API.

    Without `uid` the records API picks the live eval of that name, else the newest
    archived one; once the records are read, the manifest's uid is pinned, so every
    transcript comes from the same eval even if it is deleted and created again meanwhile.
    """

    def __init__(
        self, client: RecordsReader, namespace: str, name: str, *, uid: str | None = None
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.uid = uid
        self._fetched: tuple[dict[str, Any], list[AttemptRecord]] | None = None

    @property
    def title(self) -> str:
        return f"{self.namespace}/{self.name}"

    def _fetch(self) -> tuple[dict[str, Any], list[AttemptRecord]]:
        if self._fetched is None:
            self._fetched = self.client.records(self.namespace, self.name, uid=self.uid)
            uid = self._fetched[0].get("uid")
            if self.uid is None and isinstance(uid, str) and uid:
                self.uid = uid
        return self._fetched

    @property
    def manifest(self) -> dict[str, Any]:
        """The eval as archived: name, uid, creation time, task ids, the spec as it ran."""
        return self._fetch()[0]

    def records(self) -> list[AttemptRecord]:
        return list(self._fetch()[1])

    def spec_text(self) -> str | None:
        """The eval as a ConsistencyEval document (`kubectl apply`-able, like a run's)."""
        import yaml

        from passhat.api.spec import API_VERSION, KIND

        manifest = self.manifest
        spec = manifest.get("spec")
        if not isinstance(spec, dict):
            return None
        metadata = {
            key: manifest[key]
            for key in ("name", "namespace", "uid", "creationTimestamp")
            if manifest.get(key)
        }
        document = {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}
        return str(yaml.safe_dump(document, sort_keys=False))

    def transcript(self, record: AttemptRecord) -> bytes | None:
        self._fetch()  # NB: pins the uid first
        return self.client.transcript(
            self.namespace,
            self.name,
            task_id=record["task_id"],
            trial=record["trial"],
            attempt=record["attempt"],
            uid=self.uid,
        )

    def result(self, record: AttemptRecord) -> bytes | None:
        result = record.get("result")
        return None if result is None else (json.dumps(result, indent=2) + "\n").encode()


def is_eval_name(text: str) -> bool:
    """Whether SOURCE names an eval: a Kubernetes name that is not an existing directory."""
    return not os.path.isdir(text) and _NAME.fullmatch(text) is not None


def open_source(
    text: str,
    *,
    namespace: str | None = None,
    kubeconfig: str | None = None,
    uid: str | None = None,
) -> Source:
    """The source SOURCE names: a run directory or bundle, else an eval on the cluster
    (in `namespace`, default the kubeconfig context's, as `passhat report`; `uid`: that
    one of the evals of this name)."""
    if not is_eval_name(text):
        if uid is not None:
            raise UsageError(f"--uid: {text} is a directory (--uid picks a cluster eval)")
        return RunDirectory(text)
    try:
        return cluster_source(text, namespace=namespace, kubeconfig=kubeconfig, uid=uid)
    except UsageError as err:
        # NB: a mistyped run directory reads as an eval name: say both
        raise UsageError(
            f"{text}: no such directory, and no cluster to look for an eval of that name: {err}"
        ) from None


def cluster_source(
    name: str,
    *,
    namespace: str | None = None,
    kubeconfig: str | None = None,
    uid: str | None = None,
) -> ClusterSource:
    """The eval `name` on the cluster of `kubeconfig`, read through the records API."""
    from passhat.operator.live import current_namespace
    from passhat.operator.records_client import RecordsClient

    namespace = namespace or current_namespace(kubeconfig)
    return ClusterSource(RecordsClient(kubeconfig), namespace, name, uid=uid)
