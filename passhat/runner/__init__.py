"""passhat.runner: the trial wrapper a user's image runs (`passhat trial`).

`trial` runs the agent, grades its transcript with the user's grader
(`passhat.grading.run_grader`) and turns that into the result JSON and exit code passhat
understands, in a pod or a local sandbox.
"""

from passhat.runner.trial import run_trial

__all__ = ["run_trial"]
