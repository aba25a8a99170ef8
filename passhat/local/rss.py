"""The memory ceiling where cgroups are not ours to write: sample process-tree RSS.

Each attempt runs in its own session (`setsid`), so its process tree is every process
whose session id is the attempt's pid. The executor calls `session_rss` every
`INTERVAL` seconds while attempts with a memory limit run and kills a session that is
over its limit (counted as `oom_killed`, as the kernel would have). Sampling can miss a
spike shorter than the interval and a process that leaves the session; the cgroup path
(`passhat.local.cgroup`) has neither gap and is used whenever the machine allows it.
"""

from __future__ import annotations

import os

__all__ = ["INTERVAL", "session_rss"]

INTERVAL = 0.1
_PAGE = os.sysconf("SC_PAGE_SIZE")


def session_rss(sessions: set[int]) -> dict[int, int]:
    """Resident bytes per session id, summed over the live processes of each session."""
    totals = dict.fromkeys(sessions, 0)
    try:
        entries = os.listdir("/proc")
    except OSError:
        return totals
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # NB: the command name may contain spaces and parentheses; fields follow the last ")"
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) < 22:
            continue
        session = int(fields[3])
        if session in totals:
            totals[session] += int(fields[21]) * _PAGE
    return totals
