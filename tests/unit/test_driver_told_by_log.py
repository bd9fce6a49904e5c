"""driver_controller.pod.told_by_log: a failed driver container that wrote no termination message is
told by the end of its log, as the kubelet's FallbackToLogsOnError tells the failures of sparkop's own
driver pods."""

from __future__ import annotations

from sparkop.api.models import Termination
from sparkop.driver_controller.pod import FALLBACK_LOG_CHARS, FALLBACK_LOG_LINES, told_by_log

FAILED = Termination(exitCode=1, reason="Error")


def test_a_failure_without_a_message_gets_the_end_of_the_log() -> None:
    told = told_by_log(FAILED, "starting\nTraceback (most recent call last):\nValueError: boom\n")
    assert told == Termination(
        exitCode=1, reason="Error", message="starting\nTraceback (most recent call last):\nValueError: boom"
    )


def test_at_most_the_kubelets_lines_and_characters() -> None:
    many = "\n".join(f"line {n}" for n in range(200))
    told = told_by_log(FAILED, many)
    assert told is not None and told.message is not None
    assert told.message.splitlines() == [f"line {n}" for n in range(200 - FALLBACK_LOG_LINES, 200)]
    wide = "x" * 5000
    told = told_by_log(FAILED, wide)
    assert told is not None and told.message == "x" * FALLBACK_LOG_CHARS


def test_a_message_the_container_wrote_a_success_or_no_log_is_left_as_it_is() -> None:
    written = Termination(exitCode=1, reason="Error", message="its own words")
    assert told_by_log(written, "the log") is written
    succeeded = Termination(exitCode=0, reason="Completed")
    assert told_by_log(succeeded, "the log") is succeeded
    assert told_by_log(FAILED, None) is FAILED
    assert told_by_log(FAILED, "  \n") is FAILED
    assert told_by_log(None, "the log") is None
    unknown = Termination(reason="Evicted", message=None)
    assert told_by_log(unknown, "the log") is unknown
