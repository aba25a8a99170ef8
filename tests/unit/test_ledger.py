"""SlotLedger: per-slot attempts and final state, idempotent recording, tallies."""

from __future__ import annotations

import pytest

from passhat.stats import TaskTally, summarize
from passhat.trials import LedgerError, Outcome, SlotLedger, SlotState, Verdict

PASS = Verdict(Outcome.PASS, "exit_code")
FAIL = Verdict(Outcome.FAIL, "exit_code")
INFRA = Verdict(Outcome.INFRA_ERROR, "oom_killed")


def test_fresh_ledger() -> None:
    """A new ledger has every slot pending at attempt 0."""
    ledger = SlotLedger(2, 3)
    assert (ledger.slots, ledger.done, ledger.pending, ledger.retries) == (6, 0, 6, 0)
    assert ledger.next_attempt(1, 2) == 0 and not ledger.is_final(1, 2)
    assert list(ledger.pending_slots()) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert not ledger.complete


def test_retry_then_pass() -> None:
    """A non-final infra error moves the slot to the next attempt; a pass settles it."""
    ledger = SlotLedger(1, 1)
    assert ledger.record(0, 0, 0, INFRA, final=False)
    assert ledger.next_attempt(0, 0) == 1 and ledger.retries == 1
    assert ledger.record(0, 0, 1, PASS, final=True)
    assert ledger.state(0, 0) is SlotState.PASS and ledger.complete
    assert ledger.tallies(["t"]) == [TaskTally("t", 1, 0, 1)]


def test_duplicates_change_nothing() -> None:
    """Recording an attempt again, or anything on a final slot, returns False."""
    ledger = SlotLedger(1, 2)
    assert ledger.record(0, 0, 0, INFRA, final=False)
    before = ledger.pack()
    assert not ledger.record(0, 0, 0, INFRA, final=False)
    assert not ledger.record(0, 0, 0, PASS, final=True)
    assert ledger.pack() == before
    assert ledger.record(0, 0, 1, FAIL, final=True)
    assert not ledger.record(0, 0, 1, FAIL, final=True)
    assert not ledger.record(0, 0, 2, PASS, final=True)
    assert ledger.state(0, 0) is SlotState.FAIL and ledger.done == 1


def test_exhausted_slot_counts_every_infra_attempt() -> None:
    """A slot out of retries is final infra_error and all its attempts count as infra."""
    ledger = SlotLedger(2, 2)
    for attempt in range(3):
        ledger.record(0, 0, attempt, INFRA, final=attempt == 2)
    ledger.record(0, 1, 0, PASS, final=True)
    ledger.record(1, 0, 0, FAIL, final=True)
    ledger.record(1, 1, 0, INFRA, final=False)
    assert ledger.state(0, 0) is SlotState.INFRA_ERROR
    tallies = ledger.tallies(["a", "b"])
    assert tallies == [TaskTally("a", 1, 0, 3), TaskTally("b", 0, 1, 1)]
    assert (ledger.done, ledger.retries, ledger.pending) == (3, 3, 1)
    # infra-error rate as `passhat score` computes it from the same attempts as rows
    assert summarize(tallies, 1).infra_error_rate == pytest.approx(4 / 6)


def test_rule_breaking_records_raise() -> None:
    """Skipping an attempt, a non-final pass, or a slot outside the shape raise."""
    ledger = SlotLedger(1, 1)
    with pytest.raises(LedgerError, match="attempt 1 recorded before attempt 0"):
        ledger.record(0, 0, 1, PASS, final=True)
    with pytest.raises(LedgerError, match="always final"):
        ledger.record(0, 0, 0, PASS, final=False)
    with pytest.raises(LedgerError, match="no slot"):
        ledger.record(1, 0, 0, PASS, final=True)
    with pytest.raises(LedgerError, match="task ids"):
        ledger.tallies(["a", "b"])


def test_pack_round_trip() -> None:
    """unpack(pack()) gives an equal ledger with the same counts."""
    ledger = SlotLedger(3, 2)
    ledger.record(0, 0, 0, INFRA, final=False)
    ledger.record(1, 1, 0, FAIL, final=True)
    ledger.record(2, 0, 0, INFRA, final=True)
    copy = SlotLedger.unpack(ledger.pack())
    assert copy == ledger
    assert (copy.done, copy.retries, copy.pending) == (ledger.done, ledger.retries, 4)
    assert copy.tallies(["a", "b", "c"]) == ledger.tallies(["a", "b", "c"])


@pytest.mark.parametrize(
    "packed",
    ["", "v2.abc", "v1.!!!", "v1.AAAA", "v1." + "eJwDAAAAAAE="],
)
def test_unpack_refuses_garbage(packed: str) -> None:
    """Anything that is not a packed ledger raises LedgerError."""
    with pytest.raises(LedgerError):
        SlotLedger.unpack(packed)


def test_unpack_refuses_invalid_slots() -> None:
    """A final slot with zero attempts or an unknown state is refused."""
    import base64
    import struct
    import zlib

    for states, attempts in ((b"\x01", b"\x00"), (b"\x07", b"\x01")):
        raw = struct.pack(">BII", 1, 1, 1) + states + attempts
        with pytest.raises(LedgerError, match="invalid slot"):
            SlotLedger.unpack("v1." + base64.b64encode(zlib.compress(raw)).decode())
        # NB: the check is vectorised: one bad slot among many valid ones is found too
        raw = struct.pack(">BII", 1, 50, 3) + b"\x01" * 70 + states + b"\x00" * 79
        raw += b"\x02" * 70 + attempts + b"\x01" * 79
        with pytest.raises(LedgerError, match="invalid slot"):
            SlotLedger.unpack("v1." + base64.b64encode(zlib.compress(raw)).decode())
