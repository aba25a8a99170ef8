"""Every attempt on the record: the attempt record, where records live, and how to read them.

A local run directory and a cluster eval's bundle share one layout (`layout`): the
journal `trials.jsonl` (one `AttemptRecord` per finished attempt), `transcripts/<task>/
<trial>-<attempt>.log`, and `spec.yaml`. The operator archives the same records, each
attempt's logs and result JSON, into a `RecordStore` (a directory or an S3 bucket) before
it lets the attempt's pod go; `passhat trials`, `passhat transcripts` and `passhat report
--bundle` read them back through the operator's records API.

Layer: below `local`, `operator`, `runner` and `cli`; imports only `stats`, `api`, `trials`.
"""

from passhat.records.layout import (
    RESULTS,
    SPEC,
    TRANSCRIPTS,
    TRIALS,
    StoreLayout,
    transcript_name,
    transcript_relpath,
)
from passhat.records.record import (
    CLUSTER_FIELDS,
    JOURNAL_FIELDS,
    AttemptRecord,
    infra_errors_by_reason,
)
from passhat.records.source import RunDirectory, Source
from passhat.records.store import FileStore, RecordStore, StoreError, open_store

__all__ = [
    "CLUSTER_FIELDS",
    "JOURNAL_FIELDS",
    "RESULTS",
    "SPEC",
    "TRANSCRIPTS",
    "TRIALS",
    "AttemptRecord",
    "FileStore",
    "RecordStore",
    "RunDirectory",
    "Source",
    "StoreError",
    "StoreLayout",
    "infra_errors_by_reason",
    "open_store",
    "transcript_name",
    "transcript_relpath",
]
