"""Progress of long work: a live bar on a terminal, a plain line now and then anywhere else.

A backfill, a rebuild, `maintain`, `check`, `generate` and the benchmarks run for minutes with
nothing to say in between. On a terminal, tqdm draws a bar in place (it knows the width, redraws
on one line and smooths the rate); in a log or a CI job, redraws would be noise, so a line such as
`[medallion]: 12,345 / 50,000 rows (24.7%), 1,234 rows/s, 10 s` is printed at most every
PLAIN_INTERVAL_S, the first and the last always. `LAKEHOUSE_PROGRESS=plain|bar|off` forces a mode.

Progress goes to stderr, so a command's stdout (a benchmark's JSON) stays clean. A message printed
while a bar is open must not land on the bar's line: `echo` (what `lakehouse.cli.common.say` prints
through) clears the bars, prints, and draws them again.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal, TextIO, TypeVar

from shared.errors import LakehouseError

#: The environment variable that forces a mode; unset: a bar on a terminal, plain lines elsewhere.
ENV = "LAKEHOUSE_PROGRESS"
Mode = Literal["plain", "bar", "off"]
MODES: tuple[Mode, ...] = ("plain", "bar", "off")
#: Plain mode prints a line at most this often (the first and the last always).
PLAIN_INTERVAL_S = 10.0

T = TypeVar("T")
_open_bars = 0  # tqdm bars open in this process: `echo` only needs tqdm while there are some


def mode_for(stream: TextIO) -> Mode:
    """The mode LAKEHOUSE_PROGRESS asks for, else a bar on a terminal and plain lines elsewhere."""
    forced = os.environ.get(ENV, "").strip().lower()
    if forced:
        if forced not in MODES:
            raise LakehouseError(f"{ENV} must be one of {', '.join(MODES)}, got {forced!r}")
        return forced  # type: ignore[return-value]
    return "bar" if getattr(stream, "isatty", lambda: False)() else "plain"


class Progress:
    """Counts of long work (absolute, with a total once known) shown while it runs; a context manager
    whose exit shows the final count."""

    def __init__(self, label: str, total: int | None = None, unit: str = "items", *,
                 stream: TextIO | None = None, interval_s: float = PLAIN_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.mode = mode_for(self.stream)
        self.done, self.detail = 0, ""
        self._interval_s, self._clock = interval_s, clock
        self._started = clock()
        self._printed_at: float | None = None
        self._printed = ""
        self._closed = False
        self._bar = self._open_bar() if self.mode == "bar" else None

    @property
    def shown(self) -> bool:
        """Whether anything is shown (a caller can then leave out its own periodic lines)."""
        return self.mode != "off"

    def update(self, done: int, total: int | None = None, detail: str = "") -> None:
        """`done` units so far, the total if it became known, and what is being worked on."""
        if self._closed:
            return
        self.done, self.detail = done, detail
        if total is not None:
            self.total = total
        if self._bar is not None:
            self._draw()
        elif self.mode == "plain" and (self._printed_at is None
                                       or self._clock() - self._printed_at >= self._interval_s):
            self._print_line()

    def advance(self, n: int = 1, detail: str = "") -> None:
        """`n` more units done."""
        self.update(self.done + n, detail=detail)

    def close(self) -> None:
        """Show the final count (once): the bar left in place, or a last plain line unless the line
        printed last says the same."""
        global _open_bars
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._draw()
            self._bar.close()
            _open_bars -= 1
        elif self.mode == "plain" and self._line() != self._printed:
            self._print_line()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The bar off the terminal while something else writes there at length (a child process
        with bars of its own), drawn again after; plain lines need no pause."""
        if self._bar is not None:
            self._bar.clear()
        try:
            yield
        finally:
            if self._bar is not None and not self._closed:
                self._bar.refresh()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _open_bar(self) -> Any:
        from tqdm import tqdm

        global _open_bars
        # miniters=0: every update may redraw (at most every 0.1 s), so the elapsed time moves even
        # while the count waits for a micro-batch to end; disable=False: `bar` forced on a non-terminal.
        bar = tqdm(desc=self.label, total=self.total, unit=f" {self.unit}", file=self.stream,
                   dynamic_ncols=True, miniters=0, disable=False, leave=True)
        _open_bars += 1
        return bar

    def _draw(self) -> None:
        bar = self._bar
        bar.total = self.total
        bar.set_postfix_str(self.detail, refresh=False)
        bar.update(self.done - bar.n)

    def _line(self) -> str:
        elapsed = self._clock() - self._started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        share = f" ({100 * self.done / self.total:.1f}%)" if self.total else ""
        of = f" / {self.total:,}" if self.total is not None else ""
        return (f"{self.label}: {self.done:,}{of} {self.unit}{share}, {_figure(rate)} {self.unit}/s, {elapsed:,.0f} s"
                + (f", {self.detail}" if self.detail else ""))

    def _print_line(self) -> None:
        self._printed_at, self._printed = self._clock(), self._line()
        print(self._printed, file=self.stream, flush=True)


def tracked(items: Sequence[T], label: str, unit: str, detail: Callable[[T], str] = str) -> Iterator[T]:
    """The items in turn under a Progress over them, whose detail names the one being worked on."""
    with Progress(label, total=len(items), unit=unit) as progress:
        for done, item in enumerate(items):
            progress.update(done, detail=detail(item))
            yield item
        progress.update(len(items))


def echo(message: str, stream: TextIO | None = None) -> None:
    """Print a message line (to stderr by default) above the open bars instead of through them."""
    stream = stream if stream is not None else sys.stderr
    if not _open_bars:
        print(message, file=stream, flush=True)
        return
    from tqdm import tqdm

    tqdm.write(message, file=stream)  # clears the bars, writes, draws them again
    stream.flush()


class ChangedRows:
    """Status rows printed only when they say something new: a query's row (keyed by its first
    word, the query's name) is printed when it differs from the one printed last for that query,
    ignoring the clocks in it (`3.2 s ago`). A stream with nothing to do stays quiet instead of
    repeating itself every status interval.

    >>> rows = ChangedRows(print)
    >>> rows("[hot_pages] batch 7: lag 0"); rows("[hot_pages] batch 7: lag 0")
    [hot_pages] batch 7: lag 0
    """

    def __init__(self, say: Callable[[str], None]):
        self._say = say
        self._shown: dict[str, str] = {}

    def __call__(self, text: str) -> None:
        """Print each line of `text` that changed since its query's last one."""
        for line in text.splitlines():
            key, _, _ = line.strip().partition(" ")
            meaning = _CLOCK.sub("", line)
            if line.strip() and self._shown.get(key) != meaning:
                self._shown[key] = meaning
                self._say(line)


_CLOCK = re.compile(r"[\d.,]+ s ago")


def _figure(rate: float) -> str:
    """A rate to read at a glance: whole units with separators, two significant digits under 10."""
    return f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"
