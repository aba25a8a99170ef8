"""The HTML report links a flaky task to its transcripts, relative and escaped."""

from __future__ import annotations

from passhat.report import build_report, render_report
from passhat.stats import TaskTally

TALLIES = [TaskTally("flaky", 1, 1, 0), TaskTally("steady", 2, 0, 0)]


def test_flaky_rows_get_their_links_and_steady_rows_none() -> None:
    """Links given for both tasks show only beside the flaky one (the report's question)."""
    links = {
        "flaky": [
            ("0-0 pass", "transcripts/flaky/0-0.log"),
            ("1-0 fail", "transcripts/flaky/1-0.log"),
        ],
        "steady": [("0-0 pass", "transcripts/steady/0-0.log")],
    }
    page = render_report(build_report(TALLIES, [1, 2], transcripts=links), "html")
    assert '<a href="transcripts/flaky/0-0.log">0-0 pass</a>' in page
    assert '<a href="transcripts/flaky/1-0.log">1-0 fail</a>' in page
    assert "transcripts/steady" not in page
    assert "<th>transcripts</th>" in page


def test_hrefs_are_quoted_and_escaped() -> None:
    """An odd character in a path is percent-encoded, so the link stays one attribute."""
    links = {"flaky": [("0-0 <pass>", 'transcripts/a"b/0-0.log')]}
    page = render_report(build_report(TALLIES, [1], transcripts=links), "html")
    assert '<a href="transcripts/a%22b/0-0.log">0-0 &lt;pass&gt;</a>' in page


def test_without_links_no_column() -> None:
    """A report without links (score of a file) has no transcripts column."""
    page = render_report(build_report(TALLIES, [1]), "html")
    assert "<th>transcripts</th>" not in page
