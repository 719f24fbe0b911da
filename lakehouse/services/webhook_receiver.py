"""A webhook receiver for Alertmanager's notifications, for the tests, the demo and a laptop: each POST is
kept, one JSON line per notification, in a file that `lakehouse alertmanager notifications` reads.

Alertmanager posts a notification to `webhook_configs[].url` as JSON: {"receiver", "status", "alerts":
[{"labels", "annotations", "startsAt", "endsAt", ...}], "groupLabels", ...}. The receiver's path names
the route (`/merchandising`, `/on-call` in conf/alertmanager.yml), kept as `path` beside the body and
the time it arrived. It answers 200 to every POST whose body is JSON, 400 to one that is not (Alertmanager
then retries it), and `GET /-/ready` with 200.

    python -m lakehouse.services.webhook_receiver --port 9095 --file .run/alertmanager/notifications.jsonl

Standard library only: the receiver runs as its own small process.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def read_notifications(file: Path) -> list[dict[str, Any]]:
    """The notifications kept in `file`, oldest first: {"path", "receivedAt", "body"} each; none when the
    file is not there yet. A line cut short by a kill is skipped."""
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    kept = []
    for line in lines:
        try:
            kept.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return kept


def serve(host: str, port: int, file: Path) -> ThreadingHTTPServer:
    """A server that appends each notification posted to it to `file`; call `serve_forever()` on it."""
    file.parent.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                notification = json.loads(body)
            except (json.JSONDecodeError, UnicodeDecodeError):
                self.send_error(400, "the body is not JSON")
                return
            line = json.dumps({"path": self.path, "receivedAt": datetime.now(timezone.utc).isoformat(),
                               "body": notification})
            with lock, open(file, "a", encoding="utf-8") as kept:
                kept.write(line + "\n")
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            if self.path != "/-/ready":
                self.send_error(404, "POST notifications here; GET /-/ready only")
                return
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass  # one line per notification would drown the log; the file has them

    return ThreadingHTTPServer((host, port), Handler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lakehouse.services.webhook_receiver",
                                     description="Keep each notification Alertmanager posts, one JSON line each.")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, required=True, help="port to listen on")
    parser.add_argument("--file", type=Path, required=True, help="the JSON-lines file the notifications go to")
    args = parser.parse_args(argv)
    try:
        server = serve(args.host, args.port, args.file)
    except OSError as error:
        print(f"error: the webhook receiver cannot listen on {args.host}:{args.port}: {error}", file=sys.stderr)
        return 2
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
