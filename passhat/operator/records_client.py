"""Read an eval's archived records and transcripts through the records API, as the user.

`passhat trials` and `passhat transcripts` call this client. It goes through the
kube-apiserver with the user's own kubeconfig (so the cluster's authentication, the
aggregation layer and the operator's `pods/log` access review all apply); it never
touches the record store and never needs store credentials. Every failure becomes one
printable line (a `RecordsApiError`, a `PasshatError`): the missing right for a 403, and
"the passhat records API is not available" when no operator serves the API.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any, cast

import urllib3

from passhat.api.errors import PasshatError
from passhat.operator.live import client_config
from passhat.operator.records_api import GROUP, VERSION
from passhat.records import AttemptRecord

__all__ = ["UNAVAILABLE", "RecordsApiError", "RecordsClient"]

UNAVAILABLE = (
    "the passhat records API is not available (is the operator installed with records enabled?)"
)


# How long a read is asked again while the records API is busy (429) before it fails.
BUSY_WAIT_S = 60.0


class RecordsApiError(PasshatError):
    """The records API refused or could not answer; `code` is the HTTP status (0: no
    answer at all), `str(err)` the one line to print."""

    def __init__(self, message: str, *, code: int) -> None:
        self.code = code
        super().__init__(message)


class RecordsClient:
    """The records API of the cluster in `kubeconfig` (default: $KUBECONFIG, ~/.kube/config,
    or the pod's service account), with that kubeconfig's user."""

    def __init__(self, kubeconfig: str | None = None, *, timeout_s: float = 60.0) -> None:
        from kubernetes import client

        self._configuration = client_config(kubeconfig)
        self._client = client.ApiClient(self._configuration)
        self._client.user_agent = "passhat-cli"
        self._timeout_s = timeout_s

    def records(
        self, namespace: str, name: str, *, uid: str | None = None
    ) -> tuple[dict[str, Any], list[AttemptRecord]]:
        """(the eval's manifest `eval.json`, every archived attempt in task order, trial,
        attempt). `uid` picks one of several evals of this name (default: the live one,
        else the newest archived). RecordsApiError when there are none or access is refused."""
        query = {"uid": uid} if uid else {}
        records: list[AttemptRecord] = []
        while True:
            code, raw = self._get(namespace, name, "trials", query)
            body = _decode(raw)
            if code != 200 or not isinstance(body, dict):
                raise self._error(code, body, raw)
            manifest, page = body.get("eval"), body.get("records")
            if not isinstance(manifest, dict) or not isinstance(page, list):
                raise RecordsApiError(
                    f"{namespace}/{name}: the records API answered without eval and records",
                    code=code,
                )
            records += [cast(AttemptRecord, item) for item in page if isinstance(item, dict)]
            meta = body.get("metadata") or {}
            token = meta.get("continue") if isinstance(meta, dict) else None
            if not token:
                return manifest, _in_task_order(records, manifest)
            # NB: every page of the same eval, also if one of its name is made meanwhile
            query = {"uid": str(meta.get("uid") or uid or ""), "continue": str(token)}

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
        """The attempt's transcript (every container's log, each under a header line); None
        when the eval has records but not this transcript. RecordsApiError otherwise."""
        query = {"task": task_id, "trial": str(trial), "attempt": str(attempt)}
        if uid:
            query["uid"] = uid
        code, raw = self._get(namespace, name, "transcript", query)
        if code == 200:
            return raw
        body = _decode(raw)
        if code == 404 and _ours(body) and (body.get("details") or {}).get("kind") != "evals":
            return None
        raise self._error(code, body, raw)

    def close(self) -> None:
        """Close the connections."""
        self._client.close()  # type: ignore[no-untyped-call]

    # -- the raw call ------------------------------------------------------------------------

    def _get(self, namespace: str, name: str, sub: str, query: dict[str, str]) -> tuple[int, bytes]:
        """One read; while the server says too many reads are in flight (429: the records
        API's read slots), asked again after its `retryAfterSeconds`, for up to a minute."""
        deadline = time.monotonic() + BUSY_WAIT_S
        while True:
            code, raw = self._get_once(namespace, name, sub, query)
            if code != 429 or time.monotonic() >= deadline:
                return code, raw
            body = _decode(raw)
            after = (body.get("details") or {}).get("retryAfterSeconds") if _ours(body) else None
            time.sleep(min(5.0, float(after)) if isinstance(after, int | float) and after else 1.0)

    def _get_once(
        self, namespace: str, name: str, sub: str, query: dict[str, str]
    ) -> tuple[int, bytes]:
        quote = urllib.parse.quote
        path = (
            f"/apis/{GROUP}/{VERSION}/namespaces/{quote(namespace, safe='')}/evals/"
            f"{quote(name, safe='')}/{sub}"
        )
        if query:
            path += "?" + urllib.parse.urlencode(query)
        try:
            method, url, headers, _, _ = self._client.param_serialize(
                method="GET",
                resource_path=path,
                header_params={"Accept": "application/json, text/plain, */*"},
                auth_settings=["BearerToken"],
            )
            response = self._client.call_api(
                method, url, header_params=headers, _request_timeout=self._timeout_s
            )
            try:
                raw = response.read()  # type: ignore[no-untyped-call]
            finally:
                response.response.release_conn()
        except (urllib3.exceptions.HTTPError, OSError) as err:
            host = getattr(self._configuration, "host", "the cluster")
            raise RecordsApiError(f"cannot reach {host}: {err}", code=0) from None
        return int(response.status), bytes(raw or b"")

    def _error(self, code: int, body: Any, raw: bytes) -> RecordsApiError:
        message = str(body.get("message") or "") if isinstance(body, dict) else ""
        if not message:
            message = raw[:200].decode(errors="replace").strip() or f"HTTP {code}"
        if code == 403:
            return RecordsApiError(message, code=code)
        if code == 401:
            return RecordsApiError(
                f"the cluster did not accept your credentials: {message}", code=code
            )
        if code in (404, 503) and not _ours(body):
            return RecordsApiError(f"{UNAVAILABLE}: {message}", code=code)
        return RecordsApiError(message, code=code)


def _in_task_order(
    records: list[AttemptRecord], manifest: Mapping[str, Any]
) -> list[AttemptRecord]:
    """Records in task order (the spec's, `taskIds`), then trial, then attempt: each page
    is, the pages follow the store's key order."""
    tasks = manifest.get("taskIds")
    index = {task: n for n, task in enumerate(tasks)} if isinstance(tasks, list) else {}
    return sorted(
        records,
        key=lambda r: (
            index.get(r.get("task_id"), len(index)),
            r.get("trial", 0),
            r.get("attempt", 0),
        ),
    )


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _ours(body: Any) -> bool:
    """Whether an error body is a Status from the records API itself (not from the
    kube-apiserver about a missing or unreachable APIService)."""
    return (
        isinstance(body, dict)
        and body.get("kind") == "Status"
        and (body.get("details") or {}).get("group") == GROUP
    )
