"""Writing records out in the run-directory layout: attempts' files, and whole bundles.

`passhat transcripts SOURCE --out DIR` writes the chosen attempts' transcripts and result
JSON; `passhat report NAME --bundle DIR` writes a whole bundle: every attempt's files,
`spec.yaml`, `report.html` (its flaky tasks linking to their transcripts) and, last,
`trials.jsonl`. A bundle is laid out like a local run directory, so every command that
reads a run directory reads a bundle the same way.

Files are written whole (a temporary file renamed into place), so a bundle cut short by
Ctrl-C holds only complete files, and lacks `trials.jsonl` until everything else is there.
The report itself is rendered by the caller (`render_html`): this layer does not import
`passhat.report`.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from passhat.api.errors import InputError
from passhat.records.layout import REPORT, RESULTS, SPEC, TRIALS, transcript_relpath
from passhat.records.record import AttemptRecord
from passhat.records.source import Source

__all__ = [
    "Links",
    "Written",
    "jsonl",
    "prepare_bundle_dir",
    "transcript_links",
    "write_attempts",
    "write_bundle",
    "write_file",
]

# task id -> (label, relative href) of each of its transcripts
Links = dict[str, list[tuple[str, str]]]
# report.html from the records and the transcripts the bundle holds (relative paths)
RenderHtml = Callable[[Sequence[AttemptRecord], Collection[str]], str]
# Attempts fetched and written at a time (write_attempts).
FETCHERS = 8
# A local run directory holds this lock file; a bundle is never written into one.
_RUN_LOCK = ".passhat.lock"


@dataclass
class Written:
    """What write_attempts wrote, and the attempts that had no transcript."""

    transcripts: list[str] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    missing: list[AttemptRecord] = field(default_factory=list)


def jsonl(records: Iterable[AttemptRecord]) -> str:
    """The records as `trials.jsonl` text (one JSON object a line, as the journal writes)."""
    return "".join(json.dumps(record) + "\n" for record in records)


def _umask() -> int:
    """The process's umask, read without changing it (os.umask sets it, and the bundle's
    fetcher threads create files meanwhile): /proc/self/status has it since Linux 4.7."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def write_file(path: str, data: bytes) -> None:
    """Write `data` to `path` whole (a temporary file renamed into place); InputError if not.

    The file gets the mode `open()` would give it (0666 less the umask), not mkstemp's
    0600: a report.html or run.json readable by the owner only was the odd one out in a
    run directory whose trials.jsonl and transcripts the team (or CI's web server) reads.
    """
    directory = os.path.dirname(path) or "."
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
        try:
            os.fchmod(fd, 0o666 & ~_umask())
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as err:
        raise InputError(f"cannot write: {err.strerror or err}", path=path) from None


def write_attempts(source: Source, records: Sequence[AttemptRecord], dest: str) -> Written:
    """Each attempt's transcript and result JSON (when it has them) under `dest`, laid out
    as in a run directory (`transcripts/...`, `results/...`).

    FETCHERS attempts at a time: from a cluster each transcript is a round trip through
    the API server, and a bundle of thousands of attempts would wait for them one by one.
    """
    written = Written()
    pool = ThreadPoolExecutor(max_workers=FETCHERS, thread_name_prefix="passhat-fetch")
    try:
        for record, transcript, result in pool.map(
            lambda record: _write_attempt(source, record, dest), records
        ):
            if transcript is None:
                written.missing.append(record)
            else:
                written.transcripts.append(transcript)
            if result is not None:
                written.results.append(result)
    finally:
        # NB: on an error or Ctrl-C, attempts not started yet are dropped, not fetched
        pool.shutdown(wait=True, cancel_futures=True)
    return written


def _write_attempt(
    source: Source, record: AttemptRecord, dest: str
) -> tuple[AttemptRecord, str | None, str | None]:
    """Write one attempt's files; (record, transcript relpath or None, result relpath or None)."""
    task_id, trial, attempt = record["task_id"], record["trial"], record["attempt"]
    transcript_path = result_path = None
    transcript = source.transcript(record)
    if transcript is not None:
        transcript_path = transcript_relpath(task_id, trial, attempt)
        write_file(os.path.join(dest, transcript_path), transcript)
    result = source.result(record)
    if result is not None:
        result_path = transcript_relpath(task_id, trial, attempt, kind=RESULTS)
        write_file(os.path.join(dest, result_path), result)
    return record, transcript_path, result_path


def transcript_links(
    records: Iterable[AttemptRecord],
    *,
    tasks: Collection[str],
    present: Iterable[str] | None = None,
) -> Links:
    """Per task of `tasks` (the report's flaky ones), a `trial-attempt outcome` label and
    the relative path of each transcript in `present` (the report links only what the
    folder holds; None: every record's, as in a run directory, where each attempt has its
    transcript)."""
    have = None if present is None else set(present)
    links: Links = {}
    chosen = [r for r in records if r["task_id"] in tasks]
    # NB: by trial, then attempt (the journal is in the order attempts ended)
    for record in sorted(chosen, key=lambda r: (r["trial"], r["attempt"])):
        relpath = transcript_relpath(record["task_id"], record["trial"], record["attempt"])
        if have is None or relpath in have:
            label = f"{record['trial']}-{record['attempt']} {record['outcome']}"
            links.setdefault(record["task_id"], []).append((label, relpath))
    return links


def prepare_bundle_dir(dest: str) -> None:
    """Make sure `dest` may take a bundle: absent, empty, or an earlier bundle (replaced
    file by file). A local run directory or any other non-empty directory is refused."""
    if not os.path.exists(dest):
        return
    if not os.path.isdir(dest):
        raise InputError("exists and is not a directory (--bundle needs a directory)", path=dest)
    try:
        names = set(os.listdir(dest))
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", path=dest) from None
    if _RUN_LOCK in names:
        raise InputError(
            "is a passhat run directory: write the bundle to a new directory", path=dest
        )
    if names and TRIALS not in names:
        raise InputError(
            f"is not empty and holds no bundle ({TRIALS}): write the bundle to a new "
            "or empty directory",
            path=dest,
        )


def write_bundle(source: Source, dest: str, *, render_html: RenderHtml) -> Written:
    """Write `source` to `dest` as a bundle; `render_html(records, transcripts written)`
    makes report.html (linking with `transcript_links`).

    `trials.jsonl` is written last: a folder that has it is a whole bundle.
    """
    prepare_bundle_dir(dest)
    records = source.records()
    written = write_attempts(source, records, dest)
    spec = source.spec_text()
    if spec is not None:
        write_file(os.path.join(dest, SPEC), spec.encode())
    html = render_html(records, written.transcripts)
    write_file(os.path.join(dest, REPORT), html.encode())
    write_file(os.path.join(dest, TRIALS), jsonl(records).encode())
    return written
