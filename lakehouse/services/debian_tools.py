"""Programs the tests and a laptop need from a Debian package (Prometheus, Alertmanager): found, or
installed without root.

A program is looked for

  - on the PATH (an operator's own installation wins), else
  - in `<project>/.tools/<package>/usr/bin/`, where `install()` unpacks the package: `apt-get download`
    (any user may) and `dpkg-deb -x` (no root, no dpkg database, no service started), so a developer
    gets the tools without `sudo`.

The product does not need them to run; its tests and shipped configurations do. Standard library only:
set-up runs this before anything else may be importable.

    PROMETHEUS = DebianTools("prometheus", {"prometheus": "prometheus", "promtool": "promtool"}, "promtool")
    PROMETHEUS.ensure() -> {"prometheus": Path(".../prometheus"), "promtool": Path(...)}, or None (`.why`)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from shared import PROJECT_ROOT
from shared.errors import MissingDependencyError


def _run(command: list[str], cwd: Path | None = None, timeout_s: float = 600) -> subprocess.CompletedProcess:
    """`command`'s result; a program that cannot start or hangs (a dead mirror) is a failed result too,
    so that the caller's message, not a traceback, reaches the user."""
    try:
        return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as error:
        return subprocess.CompletedProcess(command, 1, "", str(error))


def _tail(text: str, count: int = 5) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-count:] if line.strip())


class DebianTools:
    """The programs of one Debian package: `programs` maps the name this project calls each by to its file
    name in the package (and on the PATH); `versioned` is the one whose `--version` proves they run."""

    def __init__(self, package: str, programs: Mapping[str, str], versioned: str):
        self.package = package
        self.programs = dict(programs)
        self.versioned = versioned
        self.folder = PROJECT_ROOT / ".tools" / package  # git-ignored, like .venv/ and .jars/
        self.local_bin = self.folder / "usr" / "bin"
        self.why: str | None = None  # why the last search or installation found nothing

    def version(self, programs: Mapping[str, Path]) -> str | None:
        """The versioned program's first version line, or None when it does not run (broken or foreign)."""
        result = _run([str(programs[self.versioned]), "--version"], timeout_s=30)
        if result.returncode != 0:
            return None
        # Prometheus's programs print their version on stdout or stderr depending on the release.
        lines = (result.stdout + result.stderr).strip().splitlines()
        return lines[0].strip() if lines else f"{self.versioned} (version unknown)"

    def found(self) -> dict[str, Path] | None:
        """The programs, as absolute paths, from the PATH or the unpacked package; None (`why` says why) when
        they are not there or do not run. Never installs."""
        on_path = {name: shutil.which(file) for name, file in self.programs.items()}
        candidates = [{name: Path(path) for name, path in on_path.items() if path}] if all(on_path.values()) else []
        candidates.append({name: self.local_bin / file for name, file in self.programs.items()})
        for programs in candidates:
            if all(path.is_file() for path in programs.values()) and self.version(programs) is not None:
                self.why = None
                return {name: path.resolve() for name, path in programs.items()}
        self.why = self.why or (
            f"{' and '.join(self.programs.values())} were found neither on the PATH nor in {self.local_bin}: run "
            f"`make setup`, or install them (Debian/Ubuntu: apt-get install {self.package})")
        return None

    def install(self) -> dict[str, Path]:
        """Unpack the package into `.tools/<package>/`; the programs when they run. MissingDependencyError,
        with the reason, when this machine cannot (no apt-get, no network, no such package)."""
        try:
            return self._install()
        except MissingDependencyError as error:
            self.why = str(error)
            raise

    def ensure(self) -> dict[str, Path] | None:
        """The programs, installed when missing; None when that fails (`why` says why)."""
        found = self.found()
        if found is not None:
            return found
        try:
            return self.install()
        except MissingDependencyError:
            return None

    def _install(self) -> dict[str, Path]:
        package = self.package
        apt_get, dpkg_deb = shutil.which("apt-get"), shutil.which("dpkg-deb")
        if apt_get is None or dpkg_deb is None:
            raise MissingDependencyError(
                f"cannot install {package} here: apt-get and dpkg-deb are needed (a Debian or Ubuntu machine); "
                f"install it yourself and put {' and '.join(self.programs.values())} on the PATH")
        with tempfile.TemporaryDirectory(prefix=f"{package}-deb-") as folder:
            download = _run([apt_get, "download", "-q", package], cwd=Path(folder))
            if download.returncode != 0 and os.geteuid() == 0:
                # Package lists missing or stale (a fresh container): refresh them, then try again.
                update = _run([apt_get, "update", "-qq"])
                if update.returncode != 0:
                    raise MissingDependencyError(
                        f"cannot install {package}: `apt-get update` failed (no network?): {_tail(update.stderr)}")
                download = _run([apt_get, "download", "-q", package], cwd=Path(folder))
            if download.returncode != 0:
                hint = "" if os.geteuid() == 0 else " (as root, `apt-get update` first may help)"
                raise MissingDependencyError(f"cannot install {package}: `apt-get download {package}` failed{hint}: "
                                             f"{_tail(download.stderr or download.stdout)}")
            debs = sorted(Path(folder).glob(f"{package}_*.deb"))
            if not debs:
                raise MissingDependencyError(f"cannot install {package}: `apt-get download` wrote no .deb in {folder}")
            # Unpack afresh: a half-unpacked earlier attempt must not be mistaken for an installation.
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder.mkdir(parents=True)
            unpack = _run([dpkg_deb, "-x", str(debs[-1]), str(self.folder)])
            if unpack.returncode != 0:
                raise MissingDependencyError(
                    f"cannot install {package}: `dpkg-deb -x {debs[-1].name}` failed: {_tail(unpack.stderr)}")
        programs = {name: self.local_bin / file for name, file in self.programs.items()}
        if not all(path.is_file() for path in programs.values()) or self.version(programs) is None:
            raise MissingDependencyError(f"the unpacked {package} package has no working "
                                         f"{' and '.join(self.programs.values())} in {self.local_bin}")
        return {name: path.resolve() for name, path in programs.items()}


def main(tools: DebianTools, prog: str, argv: list[str] | None = None) -> int:
    """`<prog> install [--require]` and `<prog> which`, for the Makefile's set-up and for a developer."""
    import argparse
    import sys

    names = " and ".join(tools.programs.values())
    parser = argparse.ArgumentParser(
        prog=prog, description=f"Find {names} (PATH, then {tools.folder.relative_to(PROJECT_ROOT)}), or install "
                               f"Debian's {tools.package} package there without root. The tests and the shipped "
                               "configurations need them; the product does not.")
    commands = parser.add_subparsers(dest="command", required=True)
    install_parser = commands.add_parser(
        "install", help="install when not found (prints what it found or did)",
        description=f"Install Debian's {tools.package} package when {names} are not found. When that is "
                    "impossible here, print why on stderr and exit 0 (the tests that need them then skip), "
                    "unless --require is given.")
    install_parser.add_argument("--require", action="store_true",
                                help="exit non-zero when the programs can be neither found nor installed")
    commands.add_parser("which", help="print where the programs are, or why they are missing (exit 1)")
    args = parser.parse_args(argv)

    found = tools.found()
    if args.command == "which":
        if found is None:
            print(tools.why, file=sys.stderr)
            return 1
        print("\n".join(f"{name}: {path}" for name, path in found.items()))
        print(tools.version(found))
        return 0
    if found is not None:
        print(f"{tools.package}: found {tools.version(found)} at {found[tools.versioned].parent}")
        return 0
    try:
        installed = tools.install()
    except MissingDependencyError as error:
        print(f"{tools.package}: not installed: {error}", file=sys.stderr)
        return error.exit_code if args.require else 0
    print(f"{tools.package}: installed {tools.version(installed)} into {tools.local_bin}")
    return 0
