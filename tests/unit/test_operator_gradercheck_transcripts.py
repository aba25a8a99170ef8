"""Without a record store the stability check reads its transcripts from the kept trial
pods; a pod someone else made under a trial pod's name (another user of the namespace,
who deleted the kept original) is not that trial's transcript: it is never handed to the
grader, the attempt counts as a missing transcript."""

from __future__ import annotations

from passhat.operator.gradercheck import ANNOTATION_TRANSCRIPT, pod_log_transcripts
from passhat.operator.ownership import ANNOTATION_CREATED_BY
from passhat.operator.pods import PodKey, pod_name
from tests.unit.test_operator_gradercheck_queue import grader_pods
from tests.unit.test_operator_loop import CONFIG, Harness
from tests.unit.test_operator_loop_gradercheck import check_spec, honest


def test_a_look_alike_under_a_trial_pods_name_is_not_its_transcript() -> None:
    """Every kept trial pod of the sample swapped for an unsigned look-alike logging a
    forged transcript before the check starts: no grader pod carries the forgery, and
    each sampled attempt is a missing transcript."""
    harness = Harness(0, body=check_spec(), grader=honest)
    forged = b"FORGED: pass\n"

    def swap() -> None:
        for name, pod in harness.api.pods.items():
            labels = pod["metadata"]["labels"]
            if "passhat.dev/grading" in labels or "passhat.dev/recorded" not in labels:
                continue
            pod["metadata"].get("annotations", {}).pop(ANNOTATION_CREATED_BY, None)
            harness.api.logs[name] = forged

    harness.run(between=swap)
    check = harness.status["graderCheck"]
    assert all(
        forged.decode() not in p["metadata"]["annotations"][ANNOTATION_TRANSCRIPT]
        for p in grader_pods(harness)
    )
    assert check["missingTranscripts"] > 0


def test_pod_log_transcripts_reads_only_the_operators_pods() -> None:
    """The reader itself: the operator's pod gives its log, an unsigned one gives None."""
    harness = Harness(0, body=check_spec(), grader=honest)
    harness.run()
    key = PodKey(0, 0, 0)
    name = pod_name(harness.ref, key)
    owned = harness.loop._signer.owns  # the loop's own key
    read = pod_log_transcripts(
        harness.api,
        harness.ref,
        limit=CONFIG.archive_log_limit_bytes,
        owns=lambda pod: owned(pod, harness.ref.uid),
    )
    assert read(key) is not None
    harness.api.pods[name]["metadata"]["annotations"].pop(ANNOTATION_CREATED_BY)
    assert read(key) is None
