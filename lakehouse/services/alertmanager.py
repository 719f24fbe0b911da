"""Alertmanager for the tests, the demo and a laptop: its programs found, or Debian's
`prometheus-alertmanager` package installed without root (lakehouse.services.debian_tools), and an
embedded Alertmanager started with a webhook receiver beside it (`lakehouse alertmanager start`).

The embedded one runs the shipped routes (`alertmanager.config_file`, conf/alertmanager.yml) with each
webhook on loopback sent to its own receiver (`alertmanager.webhook_port`), which keeps every notification
in `<run_dir>/notifications.jsonl` (lakehouse.services.webhook_receiver). It listens on 127.0.0.1 only and
runs no cluster (no gossip port). Started and stopped like the broker: pid files, logs, a stale pid file
taken for what it is.

    python -m lakehouse.services.alertmanager install     (the Makefile's set-up does, once)
"""

from __future__ import annotations

import sys
import time
from collections import Counter
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import urlparse

import yaml

from lakehouse.services.daemon import Daemon, ServiceError, require_free_ports
from lakehouse.services.debian_tools import DebianTools, main as tools_main
from lakehouse.services.webhook_receiver import read_notifications
from operational.alertmanager_alerts import HOT_PAGE
from shared.config import Config
from shared.errors import MissingDependencyError

#: Where Debian's build of Alertmanager reads its default notification template (and its UI) from, a
#: folder only root may write: the package unpacked without root has them under its own usr/share instead.
DEBIAN_ASSETS = b"/usr/share/prometheus/alertmanager"
#: The same path relative to the folder that holds the unpacked assets' folder (the program runs there),
#: as long as the absolute one (repeated slashes are one), so that it takes its place in the program's bytes.
RELATIVE_ASSETS = b"." + b"/" * (len(DEBIAN_ASSETS) - len(b"./alertmanager") + 1) + b"alertmanager"

ALERTMANAGER = DebianTools("prometheus-alertmanager",
                           {"alertmanager": "prometheus-alertmanager", "amtool": "amtool"}, versioned="amtool")
_LOOPBACK = ("127.0.0.1", "localhost")
_HOST = "127.0.0.1"


def installed() -> dict[str, Path]:
    """Alertmanager's programs, or MissingDependencyError saying how to install them."""
    programs = ALERTMANAGER.found()
    if programs is None:
        raise MissingDependencyError(ALERTMANAGER.why or "Alertmanager is not installed: run `make setup`")
    return programs


def with_receivers_at(routes: dict, port: int) -> dict:
    """Alertmanager's configuration `routes` with each webhook on loopback moved to `port`.

        {"receivers": [{"webhook_configs": [{"url": "http://127.0.0.1:9095/on-call"}]}]}, 9999
        -> {"receivers": [{"webhook_configs": [{"url": "http://127.0.0.1:9999/on-call"}]}]}
    """
    receivers = []
    for receiver in routes.get("receivers") or []:
        hooks = []
        for hook in receiver.get("webhook_configs") or []:
            url = urlparse(hook.get("url", ""))
            if url.hostname in _LOOPBACK:
                hook = {**hook, "url": url._replace(netloc=f"{url.hostname}:{port}").geturl()}
            hooks.append(hook)
        receivers.append({**receiver, **({"webhook_configs": hooks} if hooks else {})})
    return {**routes, "receivers": receivers}


def with_assets_beside(program: Path) -> Path | None:
    """For Debian's build unpacked without root (`program` under ALERTMANAGER's folder): the program made to
    read its assets relative to its working folder, which is returned (None for any other build, which
    reads its own). Its bytes change once; the change is idempotent.

    Debian's build reads the default template from DEBIAN_ASSETS, where an unpacked package cannot put it,
    and fails to load any configuration without it."""
    if ALERTMANAGER.folder not in program.parents:
        return None
    content = program.read_bytes()
    if DEBIAN_ASSETS in content:
        program.write_bytes(content.replace(DEBIAN_ASSETS, RELATIVE_ASSETS))
    return ALERTMANAGER.folder / "usr" / "share" / "prometheus"


@dataclass(frozen=True)
class AlertmanagerStatus:
    running: bool
    pid: int | None
    url: str
    receiver_pid: int | None
    notifications: int

    @property
    def healthy(self) -> bool:
        return self.running and self.receiver_pid is not None

    def describe(self) -> str:
        if not self.running:
            return f"not running ({self.url})"
        receiver = (f"webhook receiver pid {self.receiver_pid}, {self.notifications} notification(s) kept"
                    if self.receiver_pid else "its webhook receiver is not running")
        return f"running, pid {self.pid}, {self.url}, {receiver}"


class EmbeddedAlertmanager:
    """Start, stop and inspect the Alertmanager and webhook receiver whose files live in `alertmanager.run_dir`."""

    def __init__(self, config: Config, log=print):
        self.settings = config.alertmanager
        self.run_dir = Path(self.settings.run_dir)
        self.url = f"http://{_HOST}:{self.settings.port}"
        self.receiver_url = f"http://{_HOST}:{self.settings.webhook_port}"
        self.notifications_file = self.run_dir / "notifications.jsonl"
        self.config_file = self.run_dir / "alertmanager.yml"  # the routes as run: webhooks moved to the receiver
        self._alertmanager = Daemon("alertmanager", self.run_dir, marker=["--config.file", str(self.config_file)])
        self._receiver = Daemon("webhook-receiver", self.run_dir,
                                marker=["lakehouse.services.webhook_receiver", str(self.notifications_file)])
        self._log = log

    def start(self, die_with_caller: bool = False) -> str:
        """Start both unless they run; return Alertmanager's URL once both answer.

        `die_with_caller`: the kernel kills them when this process dies (a test's); otherwise they run on
        until `stop` (`lakehouse alertmanager start`)."""
        programs = installed()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            if not self._receiver.running_pid():
                require_free_ports(_HOST, {"alertmanager.webhook_port": self.settings.webhook_port})
                self._receiver.start([sys.executable, "-m", "lakehouse.services.webhook_receiver", "--host", _HOST,
                                      "--port", str(self.settings.webhook_port), "--file", str(self.notifications_file)],
                                     die_with_caller=die_with_caller)
            if self._alertmanager.running_pid():
                self._log(f"Alertmanager already running (pid {self._alertmanager.running_pid()})")
            else:
                require_free_ports(_HOST, {"alertmanager.port": self.settings.port})
                routes = yaml.safe_load(Path(self.settings.config_file).read_text())
                self.config_file.write_text(yaml.safe_dump(with_receivers_at(routes, self.settings.webhook_port),
                                                           sort_keys=False))
                self._log(f"starting Alertmanager on {self.url}, notifications to {self.notifications_file} "
                          f"(log: {self._alertmanager.log_file})")
                self._alertmanager.start([str(programs["alertmanager"]), f"--config.file={self.config_file}",
                                          f"--storage.path={self.run_dir / 'data'}",
                                          f"--web.listen-address={_HOST}:{self.settings.port}",
                                          "--cluster.listen-address="], die_with_caller=die_with_caller,
                                         cwd=with_assets_beside(programs["alertmanager"]))
            self._wait_until_ready()
        except BaseException:
            self.stop(quiet=True)
            raise
        return self.url

    def stop(self, quiet: bool = False) -> bool:
        """SIGTERM each, SIGKILL only if it hangs past alertmanager.stop_timeout_s. False if neither ran."""
        timeout = self.settings.stop_timeout_s
        stopped = self._alertmanager.stop_saying("Alertmanager", timeout, log=self._log, quiet=quiet)
        return self._receiver.stop_saying("the webhook receiver", timeout, log=self._log, quiet=quiet) or stopped

    def status(self) -> AlertmanagerStatus:
        pid = self._alertmanager.running_pid()
        return AlertmanagerStatus(bool(pid) and _ready(self.url), pid, self.url, self._receiver.running_pid(),
                                  len(self.notifications()))

    def notifications(self, since: datetime | None = None) -> list[dict]:
        """What the receiver has kept (received at or after `since`), oldest first
        (lakehouse.services.webhook_receiver.read_notifications)."""
        return [kept for kept in read_notifications(self.notifications_file)
                if since is None or datetime.fromisoformat(kept["receivedAt"]) >= since]

    def notified_windows(self, pages: str = "", since: datetime | None = None) -> Counter:
        """Per hot window (pageId, windowStart) of the pages starting with `pages`, the firing notifications
        the receiver kept (since `since`): each window notified once is a count of 1."""
        return Counter((alert["labels"]["pageId"], alert["labels"]["windowStart"])
                       for kept in self.notifications(since) if kept["body"]["status"] == "firing"
                       for alert in kept["body"]["alerts"]
                       if alert["labels"].get("alertname") == HOT_PAGE and alert["labels"]["pageId"].startswith(pages))

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.settings.start_timeout_s
        while time.monotonic() < deadline:
            for daemon, what in ((self._alertmanager, "Alertmanager"), (self._receiver, "the webhook receiver")):
                if not daemon.running_pid():
                    raise ServiceError(f"{what} exited at start; its log ({daemon.log_file}) ends:\n{daemon.log_tail()}")
            if _ready(self.url) and _ready(self.receiver_url):
                return
            time.sleep(0.1)
        raise ServiceError(f"Alertmanager did not answer on {self.url} within {self.settings.start_timeout_s:g} s "
                           f"(alertmanager.start_timeout_s); its log ({self._alertmanager.log_file}) ends:\n"
                           f"{self._alertmanager.log_tail()}")


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


if __name__ == "__main__":
    sys.exit(tools_main(ALERTMANAGER, "python -m lakehouse.services.alertmanager"))
