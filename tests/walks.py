"""The documented walks, run as written: every command of a section's code blocks in order, in a
shell's words, with `lakehouse` from the virtualenv and the configuration a user would have, moved to
ports and folders of the test's own through $LAKEHOUSE_CONFIG, which also gives its Spark JVMs the
tests' C1-only JIT (tests.conftest.COMMAND_JVMS).

A walk starts and stops its own services: `kafka start`, `storage start` and their stops are steps of
it. Its long-running steps (`run`, `alerts --follow`) run in process groups of their own and end with
Ctrl-C (SIGINT to the group), as in a terminal. What the walk promises is checked against the truth of
the clicks topic, read back to its end offsets and computed here under the contract (tests/truth.py),
not against what `generate` says it sent: every window's highest alert record is the one its distinct
clicks call for, the hot pages are the pages alerted and the top pages, gold's hot windows per page
are the truth's, and `reconcile` compares exactly the truth's hot windows and matches them all.
"""
from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import threading
import uuid
from pathlib import Path

import yaml

from shared import PROJECT_ROOT
from shared.config_loading import load_config
from shared.config_layers import apply_override
from tests.conftest import COMMAND_JVMS, free_port
from tests.helpers import LAKEHOUSE, assert_quiet, wait_for
from tests.processes import jvms_now
from tests.topics import read_to_end
from tests.truth import Truth, assert_alerts_as_the_oracle_says


def walk(document: str, heading: str) -> list[list[str]]:
    """The commands of the section's code blocks, in order, split as a shell splits them; the section
    ends at the next heading of its level or above."""
    text = (PROJECT_ROOT / document).read_text()
    section = text[text.index(heading + "\n"):]
    level = len(heading.split(" ", 1)[0])
    end = re.search(rf"\n#{{1,{level}}} ", section[len(heading):])
    section = section[:len(heading) + end.start()] if end else section
    lines = "".join(re.findall(r"```bash\n(.*?)```", section, re.S)).splitlines()
    return [words for words in (shlex.split(line, comments=True) for line in lines) if words]


def table_rows(text: str) -> list[dict[str, str]]:
    """The rows of a command's table (a header, a rule of dashes, then one line per row)."""
    header, _, *lines = text.strip().splitlines()
    return [dict(zip(header.split(), line.split())) for line in lines]


class Running:
    """A long-running step in its own process group, its output collected as it comes."""

    def __init__(self, words: list[str], env: dict[str, str]):
        self.process = subprocess.Popen(words, env=env, cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(pipe, lines), daemon=True)
                         for pipe, lines in ((self.process.stdout, self.stdout), (self.process.stderr, self.stderr))]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(pipe, lines: list[str]) -> None:
        for line in pipe:
            lines.append(line.rstrip("\n"))

    def ctrl_c(self, timeout_s: float) -> int:
        """SIGINT to the whole group, as a terminal's Ctrl-C; the exit code once it has ended."""
        os.killpg(self.process.pid, signal.SIGINT)
        code = self.process.wait(timeout=timeout_s)
        for reader in self._readers:
            reader.join(timeout=10)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def output(self) -> str:
        return "\n".join(self.stdout + self.stderr)


def fast_path_started(run: Running) -> bool:
    return any("[hot_pages] started" in line for line in run.stderr)


def walk_as_written(steps: list[list[str]], tmp_path: Path, *settings: str) -> None:
    """Run `steps` in a shell's words with this test's ports and folders (and `settings`) layered on the
    configuration the walk exports ($LAKEHOUSE_CONFIG), checking each step's output against the truth."""
    assert steps[0] == ["source", ".venv/bin/activate"] and all(words[0] in ("lakehouse", "export")
                                                                  for words in steps[1:])
    exported = dict(item.split("=", 1) for words in steps if words[0] == "export" for item in words[1:])
    layer = yaml.safe_load((PROJECT_ROOT / exported.pop("LAKEHOUSE_CONFIG")).read_text()) \
        if "LAKEHOUSE_CONFIG" in exported else {}
    for item in (f"kafka.bootstrap_servers=127.0.0.1:{free_port()}", f"broker.run_dir={tmp_path / 'broker'}",
                 f"storage.root={tmp_path / 'lake'}", f"metrics.operational_port={free_port()}",
                 f"metrics.analytical_port={free_port()}", "spark.ui_enabled=false", *COMMAND_JVMS, *settings):
        apply_override(layer, item)
    profile = tmp_path / "mine.yaml"
    profile.write_text(yaml.safe_dump(layer))
    secrets = {name: uuid.uuid4().hex for name, value in exported.items() if value.startswith("<")}  # '<choose one>'
    env = {**os.environ, **exported, **secrets, "LAKEHOUSE_CONFIG": str(profile), "LAKEHOUSE_PROGRESS": "plain",
           "PATH": f"{Path(LAKEHOUSE).parent}{os.pathsep}{os.environ['PATH']}"}
    user = load_config(profile)  # what the walk's commands read: the embedded default and this profile
    background: dict[str, Running] = {}
    outputs: list[str] = []
    truth: dict[str, dict[str, int]] = {}  # "hot windows" and "clicks" per page, once `generate` has sent them

    def alerted_pages() -> set[str]:
        # `alerts --follow` prints `windowStart  pageId  clickCount` per alert record
        return {line.split()[1] for line in background["alerts"].stdout if len(line.split()) == 3}

    def finish(words: list[str], timeout_s: float = 300) -> str:
        done = subprocess.run(words, env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=timeout_s)
        assert done.returncode == 0, f"{shlex.join(words)} exited {done.returncode}:\n{done.stderr[-3000:]}"
        outputs.append(done.stdout + done.stderr)
        return done.stdout

    def status(service: str) -> int:
        return subprocess.run([LAKEHOUSE, service, "status"], env=env, capture_output=True, timeout=60).returncode

    try:
        for words in steps[1:]:
            command = words[1:3] if words[1] in ("kafka", "storage") else words[1:2]
            if words[0] == "export":
                continue
            elif command == ["run"]:
                run = background["run"] = Running(words, env)
                try:
                    wait_for(lambda: fast_path_started(run) or run.process.poll() is not None, 240,
                             "`run` to say [hot_pages] started", every_s=0.5)
                except AssertionError as timed_out:
                    raise AssertionError(f"{timed_out}; `run` said:\n{run.output()[-6000:]}\nthe JVMs running:\n"
                                         + "\n".join(jvms_now())) from None
                assert fast_path_started(run), \
                    f"`run` exited {run.process.poll()} before its fast path started:\n{run.output()[-6000:]}"
            elif command == ["alerts"]:
                assert "--follow" in words
                background["alerts"] = Running(words, env)
            elif command == ["generate"]:
                finish(words)
                clicks = Truth.of(read_to_end(user.kafka, user.kafka.topics.clicks))
                truth["hot windows"] = clicks.hot_windows_per_page(user.hot_pages.threshold)
                truth["clicks"] = clicks.clicks_per_page()
                hot_pages = set(truth["hot windows"])
                assert hot_pages, "generate's defaults make hot pages"
                if "alerts" in background:
                    wait_for(lambda: alerted_pages() >= hot_pages, 120, f"an alert for each hot page {hot_pages}",
                             every_s=0.5)
                assert_alerts_as_the_oracle_says(user.kafka, user.kafka.topics.alerts, clicks,
                                                 user.hot_pages.threshold, user.operational.mode == "real-time",
                                                 timeout_s=60)
                for name in sorted(background):  # "Stop `run` and `alerts` with Ctrl-C": `alerts` first
                    assert background[name].ctrl_c(timeout_s=120) == 0, background[name].output()[-3000:]
                    outputs.append(background[name].output())
                if "alerts" in background:
                    assert alerted_pages() == hot_pages, "`alerts --follow` showed the hot pages' alerts, no other"
            elif command == ["query"]:
                top = [row["pageId"] for row in table_rows(finish(words))]
                by_clicks = sorted(truth["clicks"], key=lambda page: (-truth["clicks"][page], page))
                assert top == by_clicks[:len(top)], (top, by_clicks[:len(top)])
                assert set(top[:len(truth["hot windows"])]) == set(truth["hot windows"])
            elif command == ["sql"]:
                hot_windows = {row["pageId"]: int(row["hotWindows"]) for row in table_rows(finish(words))}
                assert hot_windows == truth["hot windows"]
            elif command == ["reconcile"]:  # after a clean stop and the backfill, every hot window is compared
                verdict = finish(words).splitlines()[0]
                hot = sum(truth["hot windows"].values())
                assert verdict.startswith(f"windows compared {hot}, matched {hot}, "
                                          "pending 0, mismatches 0, unexplained 0"), \
                    f"{verdict}\n`run` said:\n" + "\n".join(line for line in background['run'].output().splitlines()
                                                     if not line.startswith("\tat "))[-6000:]
            elif command in (["kafka", "start"], ["storage", "start"], ["analytical"], ["check"], ["kafka", "stop"],
                             ["storage", "stop"]):
                finish(words)
            else:
                raise AssertionError(f"the walk has a step this test does not know: {shlex.join(words)}")
        assert truth and "run" in background, "the walk sends traffic while `run` runs"
        assert status("kafka") == 1, "`kafka stop` stopped the walk's broker"
        if ["lakehouse", "storage", "start"] in steps:
            assert status("storage") == 1, "`storage stop` stopped the walk's store"
    finally:
        for running in background.values():
            running.kill()
        for service in ("kafka", "storage"):
            if ["lakehouse", service, "start"] in steps:
                subprocess.run([LAKEHOUSE, service, "stop"], env=env, capture_output=True, timeout=120)
    output = "\n".join(outputs)
    assert "Traceback" not in output
    assert_quiet(output)
