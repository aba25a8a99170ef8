"""passhat.runner: the trial wrapper a user's image runs (`passhat trial`) and `regrade`.

Both grade transcripts with a user's grader command (`grader`); `trial` turns one agent
run into the result JSON and exit code passhat understands, in a pod or a local sandbox;
`regrade` measures how consistent the grader itself is.
"""

from passhat.runner.grader import Grade, run_grader
from passhat.runner.regrade import Regrade, regrade
from passhat.runner.trial import run_trial

__all__ = ["Grade", "Regrade", "regrade", "run_grader", "run_trial"]
