"""passhat.harness: an eval written for another harness, run as passhat trials.

"You don't need a new eval": the readers (`passhat.trials.readers`) score the logs a
harness already wrote; this package goes further and makes the harness's tasks passhat
tasks, one harness run per trial. Inspect first (`inspect_task`). Layer: above `grading`
(it grades a trial from the harness's log), below `runner` and `cli`.
"""
