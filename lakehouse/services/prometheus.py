"""Prometheus and promtool for the tests and for a laptop: found, installed without root, started.

The product serves its metrics; it does not need Prometheus to run. The tests do, to check
`conf/prometheus/` (`promtool check config`, `promtool check rules`, `promtool test rules`) and to
scrape a live endpoint, so this module finds the two programs:

  - on the PATH (an operator's own installation wins), else
  - in `<project>/.tools/prometheus/usr/bin/`, where `install()` unpacks Debian's `prometheus`
    package: `apt-get download` (any user may) and `dpkg-deb -x` (no root, no dpkg database, no
    service started), so a developer gets the tools without `sudo`.

Run `python -m lakehouse.services.prometheus install` (the Makefile's set-up does, once). When it
cannot install (no apt-get, no network) it says why on stderr and exits 0, since the product works
without it and the tests that need it skip with that reason; `--require` makes that an error.

A real Prometheus on a config file, for the tests and `bench --prometheus`: lakehouse.services.prometheus_server.

Standard library only: set-up runs it before anything else may be importable.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from shared import PROJECT_ROOT
from shared.errors import LakehouseError, MissingDependencyError

#: Where `install()` unpacks the Debian package (git-ignored, like .venv/ and .jars/).
TOOLS_DIR = PROJECT_ROOT / ".tools" / "prometheus"
#: The unpacked package's programs.
LOCAL_BIN = TOOLS_DIR / "usr" / "bin"
#: Debian's package holding both `prometheus` and `promtool`.
DEBIAN_PACKAGE = "prometheus"

#: Why the last `tools()`/`install()` found nothing, for a test's skip message.
_last_reason: str | None = None


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


def _version(promtool: Path) -> str | None:
    """promtool's version line, or None when it does not run (a broken or foreign binary)."""
    try:
        result = subprocess.run([str(promtool), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    # Prometheus's programs print their version on stdout or stderr depending on the release.
    lines = (result.stdout + result.stderr).strip().splitlines()
    return lines[0].strip() if lines else "promtool (version unknown)"


def _candidates() -> list[tuple[Path, Path]]:
    """(prometheus, promtool) pairs to try, the PATH first, then the project's own copy."""
    pairs = []
    on_path = shutil.which("promtool"), shutil.which("prometheus")
    if all(on_path):
        pairs.append((Path(on_path[1]), Path(on_path[0])))
    pairs.append((LOCAL_BIN / "prometheus", LOCAL_BIN / "promtool"))
    return pairs


def tools() -> PrometheusTools | None:
    """The programs that run, or None (then `missing_reason()` says why). Never installs."""
    global _last_reason
    for prometheus, promtool in _candidates():
        if not (prometheus.is_file() and promtool.is_file()):
            continue
        version = _version(promtool)
        if version is not None:
            _last_reason = None
            return PrometheusTools(prometheus.resolve(), promtool.resolve(), version)
    if _last_reason is None:
        _last_reason = (f"prometheus and promtool were found neither on the PATH nor in {LOCAL_BIN}: "
                        "run `python -m lakehouse.services.prometheus install` (make setup does), or install "
                        "Prometheus (Debian/Ubuntu: apt-get install prometheus)")
    return None


def missing_reason() -> str:
    """Why `tools()` found nothing: the last failed search or installation, for `pytest.skip`."""
    if _last_reason is None and tools() is not None:
        return "prometheus and promtool are available"
    return _last_reason or "prometheus and promtool were not found"


def _run(command: list[str], cwd: Path | None = None, timeout_s: float = 600) -> subprocess.CompletedProcess:
    """`command`'s result; a program that cannot start or hangs (a dead mirror) is a failed result too,
    so that the caller's message, not a traceback, reaches the user."""
    try:
        return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as error:
        return subprocess.CompletedProcess(command, 1, "", str(error))


def _tail(text: str, count: int = 5) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-count:] if line.strip())


def install() -> PrometheusTools:
    """Unpack Debian's `prometheus` package into `.tools/prometheus/`; the tools when they run.

    `apt-get download` needs no root, only the package lists; a container that ships without them
    (many do) gets `apt-get update` first, which only root may run. Raises MissingDependencyError,
    with the reason, when this machine cannot do it (no apt-get, no network, no such package)."""
    global _last_reason
    try:
        return _install()
    except MissingDependencyError as error:
        _last_reason = str(error)
        raise


def _install() -> PrometheusTools:
    apt_get, dpkg_deb = shutil.which("apt-get"), shutil.which("dpkg-deb")
    if apt_get is None or dpkg_deb is None:
        raise MissingDependencyError(
            "cannot install Prometheus here: apt-get and dpkg-deb are needed (a Debian or Ubuntu machine); "
            "install Prometheus 2.x yourself and put prometheus and promtool on the PATH")
    with tempfile.TemporaryDirectory(prefix="prometheus-deb-") as folder:
        download = _run([apt_get, "download", "-q", DEBIAN_PACKAGE], cwd=Path(folder))
        if download.returncode != 0 and os.geteuid() == 0:
            # Package lists missing or stale (a fresh container): refresh them, then try again.
            update = _run([apt_get, "update", "-qq"])
            if update.returncode != 0:
                raise MissingDependencyError(
                    f"cannot install Prometheus: `apt-get update` failed (no network?): {_tail(update.stderr)}")
            download = _run([apt_get, "download", "-q", DEBIAN_PACKAGE], cwd=Path(folder))
        if download.returncode != 0:
            hint = "" if os.geteuid() == 0 else " (as root, `apt-get update` first may help)"
            raise MissingDependencyError(
                f"cannot install Prometheus: `apt-get download {DEBIAN_PACKAGE}` failed{hint}: "
                f"{_tail(download.stderr or download.stdout)}")
        debs = sorted(Path(folder).glob(f"{DEBIAN_PACKAGE}_*.deb"))
        if not debs:
            raise MissingDependencyError(
                f"cannot install Prometheus: `apt-get download {DEBIAN_PACKAGE}` wrote no .deb in {folder}")
        # Unpack afresh: a half-unpacked earlier attempt must not be mistaken for an installation.
        shutil.rmtree(TOOLS_DIR, ignore_errors=True)
        TOOLS_DIR.mkdir(parents=True)
        unpack = _run([dpkg_deb, "-x", str(debs[-1]), str(TOOLS_DIR)])
        if unpack.returncode != 0:
            raise MissingDependencyError(
                f"cannot install Prometheus: `dpkg-deb -x {debs[-1].name}` failed: {_tail(unpack.stderr)}")
    promtool = LOCAL_BIN / "promtool"
    version = _version(promtool) if promtool.is_file() else None
    if version is None or not (LOCAL_BIN / "prometheus").is_file():
        raise MissingDependencyError(
            f"the unpacked {DEBIAN_PACKAGE} package has no working promtool and prometheus in {LOCAL_BIN}")
    return PrometheusTools((LOCAL_BIN / "prometheus").resolve(), promtool.resolve(), version)


def ensure() -> PrometheusTools | None:
    """The tools, installing them when missing; None when that fails (`missing_reason()` says why)."""
    found = tools()
    if found is not None:
        return found
    try:
        return install()
    except MissingDependencyError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lakehouse.services.prometheus",
        description="Find Prometheus and promtool (PATH, then .tools/prometheus), or install Debian's "
                    "prometheus package into .tools/prometheus without root. Only the tests and "
                    "conf/prometheus/ need them; the product does not.")
    commands = parser.add_subparsers(dest="command", required=True)
    install_parser = commands.add_parser(
        "install", help="install into .tools/prometheus when not found (prints what it found or did)",
        description="Install Debian's prometheus package into .tools/prometheus when prometheus and "
                    "promtool are not found. When that is impossible here, print why on stderr and "
                    "exit 0 (the tests that need them then skip), unless --require is given.")
    install_parser.add_argument("--require", action="store_true",
                                help="exit non-zero when the tools can be neither found nor installed")
    commands.add_parser("which", help="print where the tools are, or why they are missing (exit 1)")
    args = parser.parse_args(argv)

    found = tools()
    if args.command == "which":
        if found is None:
            print(missing_reason(), file=sys.stderr)
            return 1
        print(f"prometheus: {found.prometheus}\npromtool: {found.promtool}\n{found.version}")
        return 0
    if found is not None:
        print(f"prometheus: found {found.version} at {found.promtool.parent}")
        return 0
    try:
        installed = install()
    except LakehouseError as error:
        print(f"prometheus: not installed: {error}", file=sys.stderr)
        return error.exit_code if args.require else 0
    print(f"prometheus: installed {installed.version} into {LOCAL_BIN}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
