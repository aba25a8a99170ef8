"""A namespace claim is a Lease in a tenant's namespace, which a tenant who may write Leases
there can forge: a forged (or another release's) claim stops serving that namespace only,
never the operator (before: a namespaced operator stood by forever, and a leading one, in
either mode, exited on its next renew, for every namespace)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from passhat.operator import handlers, main
from passhat.operator.config import OperatorConfig
from passhat.operator.leader import CLAIM_LEASE, LeaseTimings, lease_holder
from tests.unit.lease_fake import Leases

# NB: generous deadlines, short retries: a loaded machine never loses the lead by itself
TIMINGS = LeaseTimings(lease_duration_s=10, renew_deadline_s=7.0, retry_period_s=0.2)
RELEASE = "sys/op"
FOREVER = 2**31 - 1


def forge(api: Leases, namespace: str) -> None:
    """What a tenant with Lease rights in `namespace` can write: a claim held by someone
    else, valid for 68 years."""
    spec = {"holderIdentity": "mallory", "leaseDurationSeconds": FOREVER}
    stored = api.items.get((namespace, CLAIM_LEASE))
    if stored is None:
        api.create_lease(
            namespace,
            {"metadata": {"name": CLAIM_LEASE, "namespace": namespace}, "spec": spec},
        )
    else:
        api.update_lease(namespace, CLAIM_LEASE, {**stored, "spec": spec})


@pytest.fixture
def election(monkeypatch: pytest.MonkeyPatch) -> Any:
    """An election over in-memory Leases serving team-a and team-b; `_exit_lost` records
    instead of exiting the test process."""
    exits: list[str] = []
    monkeypatch.setattr(main, "_exit_lost", lambda elector: exits.append(elector.holder))
    monkeypatch.setattr(handlers.runtime, "claim", None)
    monkeypatch.setattr(handlers.runtime, "refusal", None)
    api = Leases()
    options = main.OperatorOptions(
        namespaces=["team-a", "team-b"], lease=("sys", "op"), lease_timings=TIMINGS
    )
    made: list[main._Election] = []

    def make() -> tuple[main._Election, Leases, list[str]]:
        made.append(main._Election(options, OperatorConfig(), api=api))
        return made[-1], api, exits

    yield make
    for one in made:
        one.stop()


def lead(election: main._Election) -> bool:
    async def within() -> bool:
        return await asyncio.wait_for(election.lead(), 5)

    try:
        return asyncio.run(within())
    except TimeoutError:
        return False


def test_a_forged_claim_does_not_keep_the_operator_from_leading(election: Any) -> None:
    """Namespaced mode, team-a's claim forged before the operator starts: it leads and
    serves team-b; only team-a's evals wait, with the refusal naming the holder."""
    one, api, exits = election()
    forge(api, "team-a")
    assert lead(one), "a forged claim in team-a kept the operator from every namespace"
    assert lease_holder(api.items[("team-b", CLAIM_LEASE)]) == RELEASE
    assert handlers.runtime.refusal is not None
    refusal = handlers.runtime.refusal("team-a")
    assert refusal is not None and "namespace team-a is served by another" in refusal
    assert "mallory" in refusal
    assert handlers.runtime.refusal("team-b") is None
    assert not handlers._claim_lost("team-b") and handlers._claim_lost("team-a")
    assert exits == []


def test_a_claim_forged_while_leading_stops_that_namespace_only(election: Any) -> None:
    """Leading with both claims, then team-a's is forged: no exit; team-b's claim and the
    operator's Lease are still renewed; team-a's evals stop (their daemon asks `refusal`
    before each pass) until the claim is free again."""
    one, api, exits = election()
    assert lead(one)
    forge(api, "team-a")
    renewed = api.items[("team-b", CLAIM_LEASE)]["spec"]["renewTime"]
    time.sleep(5 * TIMINGS.retry_period_s)
    assert exits == [], "a claim forged in team-a stopped the operator for every namespace"
    assert one.elector.leading()
    assert handlers.runtime.refusal is not None
    assert api.items[("team-b", CLAIM_LEASE)]["spec"]["renewTime"] != renewed
    assert handlers.runtime.refusal("team-a") is not None
    assert handlers.runtime.refusal("team-b") is None


def test_a_daemon_stops_passing_while_its_namespace_is_claimed_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`_claim_lost` reads the claim's state as last renewed, without an API call."""
    asked: list[str] = []

    def refusal(namespace: str) -> str | None:
        asked.append(namespace)
        return "served by mallory" if namespace == "team-a" else None

    monkeypatch.setattr(handlers.runtime, "refusal", refusal)
    assert handlers._claim_lost("team-a")
    assert not handlers._claim_lost("team-b")
    assert asked == ["team-a", "team-b"]
    monkeypatch.setattr(handlers.runtime, "refusal", None)
    assert not handlers._claim_lost("team-a")
