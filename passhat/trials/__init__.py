"""passhat.trials: what a trial attempt ended as, how it is classified, and the ledger.

Shared by the local executor and the operator so that both classify, retry and count
trials the same way.
"""

from passhat.trials.classify import classify_exit
from passhat.trials.ledger import LedgerError, SlotLedger, SlotState
from passhat.trials.outcomes import Outcome, Verdict
from passhat.trials.result import parse_result
from passhat.trials.retry import RetryPlan

__all__ = [
    "LedgerError",
    "Outcome",
    "RetryPlan",
    "SlotLedger",
    "SlotState",
    "Verdict",
    "classify_exit",
    "parse_result",
]
