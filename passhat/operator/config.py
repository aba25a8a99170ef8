"""The operator's tunables in one frozen object, so tests can shrink every timing.

The reconcile loop, the handlers and the kube wrapper read their timings and limits from
an `OperatorConfig`; `passhat operator` builds one from its flags, tests build one with
short intervals. Defaults are what a production install wants.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from passhat.operator.ownership import PROCESS_KEY
from passhat.operator.policy import TrialPolicy

__all__ = ["OperatorConfig"]


@dataclass(frozen=True)
class OperatorConfig:
    """Timings (seconds) and limits of the reconcile loop."""

    # What trial templates may ask for beyond Pod Security "restricted" (the admin's grants).
    trial_policy: TrialPolicy = field(default_factory=TrialPolicy)
    # The key of the creation mark on every pod the operator makes (ownership.py); the
    # default is random per process: `passhat operator` reads one from a file.
    pod_key: bytes = field(default=PROCESS_KEY, repr=False)
    # A pass runs at least this often even when no pod event arrives.
    resync_interval_s: float = 3.0
    # A pass uses the eval it last read or wrote, without a GET, while kopf's watch of
    # evals shows that version (loop.EvalLoop._read_eval), for at most this long: kopf's
    # view lags the API server by its batching, and by up to its watch's inactivity
    # timeout when a stream stalls, so a spec edit is seen within this long regardless.
    eval_reread_s: float = 3.0
    # Passes of one eval are at least this far apart (wake-ups in between coalesce). It
    # bounds how soon a slot freed by a finished pod gets its next pod: 0.3 s (before #22's
    # session 17) left a slot empty 0.10 s at the median, 0.27-0.36 s at p90, 1.10 x the
    # ideal schedule at parallelism 20; 0.1 s: 0.045 / 0.10 s, 1.056 x, for 20-35 % more
    # operator CPU and no API-server CPU we could measure (docs/benchmarks.md, "Session 17").
    min_pass_interval_s: float = 0.1
    # A pod this loop created and no pod list shows yet counts as live; this long after
    # its create a GET asks the API server (the list is a watch-fed cache that may lag:
    # loop._taken_holders).
    expectation_grace_s: float = 30.0
    # Passes read their eval's pods from the cache the pod watch keeps (podcache.py), not
    # from a LIST each (False: a LIST each, as before #22).
    pod_cache: bool = True
    # The pod watch, its LIST and pod GETs read protobuf (slimpod.py: the API server's only
    # JSON watcher of pods cost it a JSON encoding of every pod event); False: JSON.
    pod_protobuf: bool = True
    # A pass that only recorded outcomes writes status at most this often (the creates of
    # fresh slots go out at once; 0: every such pass writes): loop._defer_write.
    status_interval_s: float = 1.0
    # ... and, when a status write itself is slow, no more often than its duration over
    # this share (a write that took 0.5 s: every 5 s), up to `status_interval_max_s`: at
    # 10,000 inline tasks the eval is ~0.7 MB with its managed fields and each write cost
    # the pass ~0.5 s on a loaded API server (#22). 0: the interval alone.
    status_write_share: float = 0.1
    status_interval_max_s: float = 10.0
    # After a failed pass (API down, ...) the next one waits this long.
    error_backoff_s: float = 2.0
    # A non-terminal pod this long past its deletionTimestamp counts as infra_error/deleted.
    deleted_pod_grace_s: float = 30.0
    # A waiting image/config error counts only after this long (see classify_pod).
    image_error_grace_s: float = 60.0
    # A trial pod Pending unschedulable this long is reported (a TrialPodUnschedulable event).
    unschedulable_grace_s: float = 60.0
    # At most one TrialPodUnschedulable event per eval this often (it counts the pods).
    unschedulable_event_interval_s: float = 60.0
    # InfraErrorsHigh is True above this infra-error rate.
    infra_error_threshold: float = 0.2
    # Lists capped in status (full lists in `passhat report`).
    max_listed_tasks: int = 50
    # Parallel API writes (creates, finalizer releases, deletes) per operator; one eval
    # uses at most write_threads - write_threads // 4 of them at once (kube.Kube).
    write_threads: int = 16
    # Pod creates of a pass go in slow-start batches of 1, 2, 4, ... up to this many
    # (only one batch of pod bodies is in memory at a time), at most create_per_pass_max
    # per pass (the Job controller's MaxPodCreateDeletePerSync) (passhat.operator.pacing).
    create_batch_max: int = 32
    create_per_pass_max: int = 500
    # A pass's create budget, from its first batch: after that batch, a batch is only as
    # big as fits what is left at the last batch's pace, and none starts once nothing fits
    # (the next pass goes on at once), so that a slow API server does not make passes of
    # 500 creates (10-30 s measured at 100,000 trials, #22) during which no outcome is
    # recorded (pacing.create_paced).
    create_pass_max_s: float = 1.0
    # An eval creates no pod while this many of its finished pods (or its parallelism, if
    # larger) wait for their keep or release (finalizer out, and a delete under
    # podRetention none) to go out, so that releases keep up with creates (a release is
    # one or two writes, a create one) as the Job controller's do: it removes finished
    # pods' finalizers in the same sync that creates, before the next one
    # (loop.run_pass, #22).
    release_backlog_max: int = 500
    # glibc's malloc arenas for the whole process (mallopt M_ARENA_MAX, as the environment's
    # MALLOC_ARENA_MAX does, which wins when set); 0 leaves glibc's default of 8 per core.
    # Each thread that allocates gets an arena of its own up to that cap, and the API
    # pools' 30-odd threads kept freed memory in theirs: at 100,000 trials the arenas grew
    # from 14 to 30 MiB of the RSS (#22); the GIL serializes most allocations anyway.
    malloc_arena_max: int = 2
    # Every this many seconds the free pages inside glibc's heaps go back to the kernel
    # (malloc_trim(0)); glibc itself returns only a heap's top, and the pages between
    # live chunks stayed in the RSS (#22). 0: never.
    malloc_trim_interval_s: float = 30.0
    # While the API server refuses creates for now (403 quota/admission, 429), an eval's
    # creates back off from this delay, doubling per refused pass up to the max.
    create_backoff_initial_s: float = 1.0
    create_backoff_max_s: float = 300.0
    # A QuotaExceeded / FailedCreate event per eval and reason at most this often.
    refusal_event_interval_s: float = 600.0
    # Per-request timeout and the retry budget of one API call on 5xx / connection errors.
    request_timeout_s: float = 30.0
    request_retries: int = 5
    # Transcript bytes archived per attempt, all containers together (the rest is cut).
    archive_log_limit_bytes: int = 10 * 1024 * 1024
    # A log its kubelet cannot serve holds the pod this long; then it is archived without.
    archive_log_grace_s: float = 60.0
    # User agent of the operator's API calls (the benchmark counts writes by it).
    user_agent: str = "passhat-operator"
