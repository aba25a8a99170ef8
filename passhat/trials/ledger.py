"""The exactly-once core: what each trial slot has recorded, so nothing counts twice.

A trial slot is (task index, trial index). Both executors fold finished attempts into one
`SlotLedger`, which keeps per slot the number of attempts recorded and its state (pending,
or final: pass, fail, or infra_error once retries ran out). Recording is idempotent:
attempts of a slot are numbered 0, 1, 2, ... and an attempt number already recorded is
refused, so replaying `trials.jsonl` after a crash (local) or folding a pod again after an
operator restart (cluster) changes nothing. The operator keeps the ledger in
`status.ledger` via `pack()` / `unpack()`: a few bytes per slot, compressed, so 10,000
tasks x 10 trials stay far below the status budget.

Invariant used by the counts: every attempt of a slot but its last final one was an infra
error (pass and fail are always final), so per-task infra attempts follow from
(attempts, state) alone.
"""

from __future__ import annotations

import base64
import binascii
import struct
import zlib
from collections.abc import Iterator, Sequence
from enum import IntEnum

from passhat.stats import TaskTally
from passhat.trials.outcomes import Outcome, Verdict

__all__ = ["LedgerError", "SlotLedger", "SlotState"]

_FORMAT_VERSION = 1
_HEADER = struct.Struct(">BII")  # version, n_tasks, trials
_PREFIX = "v1."
_MAX_ATTEMPTS = 255


class LedgerError(ValueError):
    """A record that breaks the ledger's rules, or a packed ledger that does not unpack."""


class SlotState(IntEnum):
    """Where a trial slot stands; everything but PENDING is final."""

    PENDING = 0
    PASS = 1
    FAIL = 2
    INFRA_ERROR = 3  # retries exhausted: out of the score, counted in the infra-error rate


_FINAL_STATE = {
    Outcome.PASS: SlotState.PASS,
    Outcome.FAIL: SlotState.FAIL,
    Outcome.INFRA_ERROR: SlotState.INFRA_ERROR,
}


class SlotLedger:
    """Attempts and final state of every (task, trial) slot of one eval."""

    def __init__(self, n_tasks: int, trials: int) -> None:
        if n_tasks < 0 or trials < 1:
            raise LedgerError(f"bad ledger shape: {n_tasks} tasks x {trials} trials")
        self.n_tasks = n_tasks
        self.trials = trials
        self._states = bytearray(n_tasks * trials)
        self._attempts = bytearray(n_tasks * trials)
        self._done = 0
        self._retries = 0

    def _slot(self, task: int, trial: int) -> int:
        if not (0 <= task < self.n_tasks and 0 <= trial < self.trials):
            raise LedgerError(
                f"no slot (task {task}, trial {trial}) in {self.n_tasks} x {self.trials}"
            )
        return task * self.trials + trial

    def record(self, task: int, trial: int, attempt: int, verdict: Verdict, *, final: bool) -> bool:
        """Fold attempt `attempt` (0-based) of slot (task, trial) in; False if already recorded.

        A duplicate (an attempt number below the slot's recorded attempts, or any attempt
        of a final slot) changes nothing. `final` says whether this attempt settles the
        slot: pass and fail always do; an infra error does when its retries ran out.
        Raises LedgerError for an attempt that skips one (attempts are recorded in order)
        or a pass/fail marked not final.
        """
        slot = self._slot(task, trial)
        recorded = self._attempts[slot]
        if attempt < recorded or self._states[slot] != SlotState.PENDING:
            return False
        if attempt != recorded:
            raise LedgerError(
                f"slot (task {task}, trial {trial}): attempt {attempt} recorded before "
                f"attempt {recorded}"
            )
        if not final and not verdict.is_infra_error:
            raise LedgerError(f"a {verdict.outcome} is always final (slot {task}/{trial})")
        if attempt + 1 > _MAX_ATTEMPTS:
            raise LedgerError(f"slot (task {task}, trial {trial}): more than 255 attempts")
        self._attempts[slot] = attempt + 1
        if final:
            self._states[slot] = _FINAL_STATE[verdict.outcome]
            self._done += 1
        else:
            self._retries += 1
        return True

    def state(self, task: int, trial: int) -> SlotState:
        """The slot's state."""
        return SlotState(self._states[self._slot(task, trial)])

    def is_final(self, task: int, trial: int) -> bool:
        """Whether the slot is settled (no further attempt will run)."""
        return self._states[self._slot(task, trial)] != SlotState.PENDING

    def attempts(self, task: int, trial: int) -> int:
        """Attempts recorded for the slot."""
        return self._attempts[self._slot(task, trial)]

    def next_attempt(self, task: int, trial: int) -> int:
        """The number of the slot's next attempt (= attempts recorded so far)."""
        return self.attempts(task, trial)

    @property
    def slots(self) -> int:
        """Number of trial slots (tasks x trials)."""
        return self.n_tasks * self.trials

    @property
    def done(self) -> int:
        """Slots that are final."""
        return self._done

    @property
    def pending(self) -> int:
        """Slots that are not final yet (waiting, running or waiting for a retry)."""
        return self.slots - self._done

    @property
    def attempts_recorded(self) -> int:
        """Attempts recorded in every slot (each final slot's last one, and every retry)."""
        return self.done + self._retries

    @property
    def retries(self) -> int:
        """Infra-error attempts that were retried (not final)."""
        return self._retries

    @property
    def complete(self) -> bool:
        """Whether every slot is final."""
        return self._done == self.slots

    def pending_slots(self) -> Iterator[tuple[int, int]]:
        """(task, trial) of every slot not final yet, task-major order."""
        start = 0
        while (index := self._states.find(SlotState.PENDING, start)) != -1:
            yield divmod(index, self.trials)
            start = index + 1

    def tallies(self, task_ids: Sequence[str]) -> list[TaskTally]:
        """Per task: passes and fails of final graded slots, and every infra-error attempt.

        Infra errors count every infra attempt (retried and exhausted), so the infra-error
        rate (infra attempts / all attempts) equals what `passhat score` computes from
        `trials.jsonl`, where each attempt is a row.
        """
        if len(task_ids) != self.n_tasks:
            raise LedgerError(f"{len(task_ids)} task ids for a ledger of {self.n_tasks} tasks")
        # NB: counted in numpy, not slot by slot in Python: every pass of the operator
        # tallies the whole ledger, and slot by slot that was a tenth of the operator's CPU
        # at 10,000 trials (#22, docs/benchmarks.md "Session 18"). A graded slot's last
        # attempt is its outcome and the ones before it infra errors; every attempt of any
        # other slot is one: so infra = all attempts - graded slots.
        import numpy as np

        shape = (self.n_tasks, self.trials)
        # NB: views of the bytearrays, not copies (local: the views end with the call)
        states = np.frombuffer(self._states, dtype=np.uint8).reshape(shape)
        attempts = np.frombuffer(self._attempts, dtype=np.uint8).reshape(shape)
        passed = np.count_nonzero(states == SlotState.PASS, axis=1)
        failed = np.count_nonzero(states == SlotState.FAIL, axis=1)
        infra = attempts.sum(axis=1, dtype=np.int64) - passed - failed
        return [
            TaskTally(task_id, p, f, i)
            for task_id, p, f, i in zip(
                task_ids, passed.tolist(), failed.tolist(), infra.tolist(), strict=True
            )
        ]

    def strips(self, task_ids: Sequence[str]) -> dict[str, str]:
        """task id -> one mark per trial slot in trial order (passhat.trials.strips): its
        final outcome, or PENDING_MARK while it is not final."""
        from passhat.trials.strips import FAIL_MARK, INFRA_MARK, PASS_MARK, PENDING_MARK

        if len(task_ids) != self.n_tasks:
            raise LedgerError(f"{len(task_ids)} task ids for a ledger of {self.n_tasks} tasks")
        marks = {
            SlotState.PENDING: PENDING_MARK,
            SlotState.PASS: PASS_MARK,
            SlotState.FAIL: FAIL_MARK,
            SlotState.INFRA_ERROR: INFRA_MARK,
        }
        table = bytes.maketrans(
            bytes(range(4)), "".join(marks[SlotState(i)] for i in range(4)).encode()
        )
        text = bytes(self._states).translate(table).decode()
        return {
            task_id: text[task * self.trials : (task + 1) * self.trials]
            for task, task_id in enumerate(task_ids)
        }

    def pack(self) -> str:
        """A compact ASCII string of the whole ledger (for `status.ledger`)."""
        raw = _HEADER.pack(_FORMAT_VERSION, self.n_tasks, self.trials)
        raw += bytes(self._states) + bytes(self._attempts)
        return _PREFIX + base64.b64encode(zlib.compress(raw, 9)).decode("ascii")

    @classmethod
    def unpack(cls, packed: str) -> SlotLedger:
        """The ledger `pack()` returned; LedgerError when `packed` is not a valid one."""
        if not packed.startswith(_PREFIX):
            raise LedgerError("not a packed ledger (unknown format)")
        try:
            # NB: bound the output so a corrupt or hostile value cannot exhaust memory.
            inflater = zlib.decompressobj()
            raw = inflater.decompress(
                base64.b64decode(packed[len(_PREFIX) :], validate=True), 64 * 2**20
            )
            if inflater.unconsumed_tail or not inflater.eof:
                raise LedgerError("packed ledger is truncated or too large")
        except (binascii.Error, zlib.error, ValueError) as err:
            if isinstance(err, LedgerError):
                raise
            raise LedgerError(f"packed ledger does not decode: {err}") from None
        if len(raw) < _HEADER.size:
            raise LedgerError("packed ledger is too short")
        version, n_tasks, trials = _HEADER.unpack_from(raw)
        slots = n_tasks * trials
        if version != _FORMAT_VERSION or trials < 1 or len(raw) != _HEADER.size + 2 * slots:
            raise LedgerError("packed ledger has a bad header or length")
        ledger = cls(n_tasks, trials)
        body = raw[_HEADER.size :]
        ledger._states = bytearray(body[:slots])
        ledger._attempts = bytearray(body[slots:])
        # NB: checked and counted in numpy, not slot by slot: the operator unpacks the
        # ledger on every pass, and at 100,000 slots the Python loop took ~30 ms a pass
        # (bench/pass_cost.py). A pending slot's attempts were all retried infra errors; a
        # final slot's were too, but for its last one: retries = attempts - final slots.
        import numpy as np

        states = np.frombuffer(ledger._states, dtype=np.uint8)
        attempts = np.frombuffer(ledger._attempts, dtype=np.uint8)
        final = states != SlotState.PENDING
        if np.any(states > SlotState.INFRA_ERROR) or np.any(final & (attempts == 0)):
            raise LedgerError("packed ledger has an invalid slot")
        ledger._done = int(np.count_nonzero(final))
        ledger._retries = int(attempts.sum(dtype=np.int64)) - ledger._done
        return ledger

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SlotLedger):
            return NotImplemented
        return (
            self.n_tasks == other.n_tasks
            and self.trials == other.trials
            and self._states == other._states
            and self._attempts == other._attempts
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"SlotLedger({self.n_tasks} tasks x {self.trials} trials, done={self.done}, "
            f"retries={self.retries})"
        )
