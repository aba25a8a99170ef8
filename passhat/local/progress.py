"""Progress of a local run on stderr: a live bar on a terminal, plain lines otherwise.

Cheap by design (the loop calls it after every event): the terminal bar redraws at most
ten times a second and imports rich only when stderr is a terminal; plain lines (CI logs)
are written when another tenth of the slots is done, or every 30 seconds.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from passhat.local.executor import Progress

__all__ = ["Display", "display_for"]


def _line(p: Progress) -> str:
    graded = p.passed + p.failed
    rate = f"{p.passed / graded:.2f}" if graded else "-"
    return (
        f"{p.done}/{p.slots} trials done, {p.running} running, {p.retries} retries, "
        f"pass rate so far {rate}"
    )


class Display:
    """Plain progress lines (the default when stderr is not a terminal)."""

    def __init__(self, stream: TextIO, name: str) -> None:
        self.stream = stream
        self.name = name
        self._last_done = -1
        self._last_time = 0.0

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        step = max(1, p.slots // 10)
        if p.done == self._last_done or (
            p.done // step == self._last_done // step
            and p.done != p.slots
            and now - self._last_time < 30
        ):
            return
        self._last_done, self._last_time = p.done, now
        self.stream.write(f"passhat: {self.name}: {_line(p)}\n")
        self.stream.flush()

    def close(self) -> None:
        """Finish the display."""


class LiveDisplay(Display):
    """A rich progress bar redrawn at most ten times a second."""

    def __init__(self, stream: TextIO, name: str) -> None:
        super().__init__(stream, name)
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar

        self._bar = Bar(
            TextColumn(f"[bold]{name}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=Console(file=stream),
            refresh_per_second=10,
            transient=False,
        )
        self._task: Any = None

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if self._task is None:
            self._bar.start()
            self._task = self._bar.add_task(self.name, total=p.slots, detail="")
        elif now - self._last_time < 0.1 and p.done != p.slots:
            return
        self._last_time = now
        graded = p.passed + p.failed
        rate = f"{p.passed / graded:.2f}" if graded else "-"
        detail = f"{p.running} running, {p.retries} retries, pass {rate}"
        self._bar.update(self._task, completed=p.done, detail=detail)

    def close(self) -> None:
        """Stop redrawing."""
        if self._task is not None:
            self._bar.stop()


def display_for(stream: TextIO | None, name: str, *, quiet: bool = False) -> Display | None:
    """The display for `stream`: live on a terminal, plain lines otherwise, None if quiet."""
    stream = stream if stream is not None else sys.stderr
    if quiet:
        return None
    if stream.isatty():
        return LiveDisplay(stream, name)
    return Display(stream, name)
