"""Prometheus and promtool for the tests and for a laptop: found, or Debian's `prometheus` package
installed without root (lakehouse.services.debian_tools).

The product serves its metrics; it does not need Prometheus to run. The tests do, to check
`conf/prometheus/` (`promtool check config`, `promtool check rules`, `promtool test rules`) and to
scrape a live endpoint. Run `python -m lakehouse.services.prometheus install` (the Makefile's set-up
does, once); when it cannot install it says why on stderr and exits 0, and the tests that need the
programs skip with that reason; `--require` makes that an error.

A real Prometheus on a config file, for the tests and `bench --prometheus`: lakehouse.services.prometheus_server.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from lakehouse.services.debian_tools import DebianTools, main as tools_main

PROMETHEUS = DebianTools("prometheus", {"prometheus": "prometheus", "promtool": "promtool"}, versioned="promtool")


@dataclass(frozen=True)
class PrometheusTools:
    """The two programs, as absolute paths, and promtool's first version line."""

    prometheus: Path
    promtool: Path
    version: str

    def promtool_run(self, *args: str, cwd: Path | None = None,
                     timeout_s: float = 120) -> subprocess.CompletedProcess:
        """`promtool <args>` with its output captured (text), whatever its exit status."""
        return subprocess.run([str(self.promtool), *args], cwd=cwd, capture_output=True, text=True,
                              timeout=timeout_s)


def _as_tools(programs: dict[str, Path] | None) -> PrometheusTools | None:
    return None if programs is None else PrometheusTools(programs["prometheus"], programs["promtool"],
                                                         PROMETHEUS.version(programs) or "")


def tools() -> PrometheusTools | None:
    """The programs that run, or None (then `missing_reason()` says why). Never installs."""
    return _as_tools(PROMETHEUS.found())


def missing_reason() -> str:
    """Why `tools()` found nothing, for `pytest.skip`."""
    return PROMETHEUS.why or "prometheus and promtool are available"


def install() -> PrometheusTools:
    """Unpack Debian's `prometheus` package into `.tools/prometheus/`; MissingDependencyError when it cannot."""
    return _as_tools(PROMETHEUS.install())  # type: ignore[return-value]  # install() raises rather than find none


def ensure() -> PrometheusTools | None:
    """The tools, installing them when missing; None when that fails (`missing_reason()` says why)."""
    return _as_tools(PROMETHEUS.ensure())


if __name__ == "__main__":
    sys.exit(tools_main(PROMETHEUS, "python -m lakehouse.services.prometheus"))
