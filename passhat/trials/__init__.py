"""passhat.trials: what a trial attempt ended as, how it is classified, and the ledger.

Shared by the local executor and the operator so that both classify, retry and count
trials the same way.
"""

from passhat.trials.outcomes import Outcome, Verdict
from passhat.trials.result import parse_result

__all__ = ["Outcome", "Verdict", "parse_result"]
