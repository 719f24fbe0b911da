"""Both paths side by side, as `lakehouse run` runs them: the one place that starts them, for `run`,
the demo and the benchmarks.

The medallion always runs in a child process of its own runtime, under `analytical.niceness`
(lakehouse.path_processes.MedallionProcess): a separate low-priority application yields the machine
whenever the fast path has work. With `alerting.alertmanager_url` set, the bridge to Alertmanager runs
in a third (NotifyProcess). The fast path runs in this process when this interpreter's Spark
runs its mode (operational.mode), on a session the caller made for it; else in a child process of
the fast path's runtime.

    paths = BothPaths(config, child_options(config), relay=say)
    with paths.started(on_progress=recorder.show):
        paths.run(spark, seconds=60, report=say, on_status=recorder.flush)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from lakehouse.path_processes import (FastPathProcess, MedallionProcess, NotifyProcess, PathProcess, ProgressRelay,
                                      stopped_at_the_end)
from operational.mode import fast_path_mode
from shared.config import Config, Supervision

Progress = Callable[[dict[str, Any]], None]


class BothPaths:
    """The two paths of one configuration, started together and stopped together."""

    def __init__(self, config: Config, child_args: Sequence[str], relay: Callable[[str], None]):
        """`child_args`: how a child process gets the configuration (path_processes.child_options);
        `relay`: where the children's stderr lines go."""
        self.config, self.child_args, self.relay = config, list(child_args), relay
        self.mode = fast_path_mode(config)
        self.children: list[PathProcess] = []
        self.medallion: MedallionProcess | None = None  # its process, once started

    @property
    def fast_path_here(self) -> bool:
        """Whether the fast path runs in this process (`run`), not in a child of its runtime."""
        return self.mode.runs_here()

    @contextmanager
    def started(self, on_progress: Progress, *, on_fast_path_progress: Progress | None = None,
                fast_path_relay: Callable[[str], None] | None = None,
                records: ProgressRelay | None = None) -> Iterator[list[PathProcess]]:
        """The medallion's process started, and the fast path's when it runs in a child; both stopped
        cleanly (side by side, each its running batch first) when the block ends, however it ends,
        then a child's failure raised as a LakehouseError.

        `on_progress`: each progress report of a child (`on_fast_path_progress`, `fast_path_relay`: the
        fast path's own, when they go elsewhere); `records`: the fast path's reports passed on to the
        medallion's process, which records them beside its own (then this process needs no JVM)."""
        children: list[PathProcess] = []
        with stopped_at_the_end(children):  # those started so far, should the next one's start fail
            if not self.fast_path_here:
                children.append(FastPathProcess(
                    self.child_args, self.config.operational.real_time.checkpoint_interval,
                    fast_path_relay or self.relay, on_progress=on_fast_path_progress or on_progress,
                    on_progress_end=records.end if records is not None else lambda: None))
            self.medallion = MedallionProcess(self.child_args, self.config.analytical.niceness, self.relay,
                                              on_progress=on_progress, records=records)
            children.append(self.medallion)
            if self.config.alerting.alertmanager_url:
                children.append(NotifyProcess(self.child_args, self.relay))
            self.children = children
            yield children

    def run(self, spark: Any, *, seconds: float | None, report: Callable[[str], None],
            on_status: Callable[[], None] | None = None, until: Callable[[], bool] = lambda: False,
            supervision: Supervision | None = None) -> None:
        """Until a stop request (SIGINT, SIGTERM), `seconds`, `until()` or a child's end: the fast
        path's query supervised here on `spark` (shared.streaming.supervise), or, in a child, a wait.
        `on_status` every status interval (`supervision`, default `operational`'s)."""
        from operational import hot_pages
        from shared.stopping import await_stop
        from shared.streaming import supervise

        settings = supervision or self.config.operational

        def done() -> bool:
            return any(child.ended for child in self.children) or until()

        if self.fast_path_here:
            supervise(hot_pages.starters(spark, self.config), settings, seconds=seconds, report=report,
                      on_status=on_status, status_lines=False, until=done, real_time_batch=self.mode.real_time_batch)
        else:
            await_stop(settings, seconds=seconds, report=report, until=done, on_status=on_status)
