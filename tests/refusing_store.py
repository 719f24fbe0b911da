"""An S3 endpoint that refuses some writes on demand: an HTTP proxy on loopback in front of a real
store, passing every request through unchanged (headers, signature and body as the client sent
them) until `refuse` is set, and then answering the PUTs and POSTs whose path `refuse` matches with
403 AccessDenied, as a store whose policy denies them does.

    with RefusingStore("http://127.0.0.1:9000") as store:   # the client's endpoint: store.endpoint
        store.refuse = lambda path: "/state/" in path
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

ACCESS_DENIED = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
                 b"<Message>Access Denied by the store's policy (tests.refusing_store)</Message></Error>")

#: Hop-by-hop headers, and the length, which the proxy sets for the body it passes on.
_NOT_PASSED_ON = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class RefusingStore:
    """The proxy: `endpoint` for clients, `refuse` (path -> bool, or None) what to deny, `refused`
    the paths it has denied, each with when (time.monotonic())."""

    def __init__(self, upstream: str):
        self.upstream = urlsplit(upstream)
        self.refuse: Callable[[str], bool] | None = None
        self.refused: list[tuple[float, str]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> "RefusingStore":
        threading.Thread(target=self._server.serve_forever, daemon=True, name="refusing-store").start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        store = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, and `Expect: 100-continue` answered as S3 does

            def log_message(self, *args: object) -> None:
                pass

            def _pass_on(self) -> None:
                if "chunked" in self.headers.get("Transfer-Encoding", ""):
                    raise NotImplementedError("a chunked request body")
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = urlsplit(self.path).path
                if self.command in ("PUT", "POST") and store.refuse is not None and store.refuse(path):
                    store.refused.append((time.monotonic(), path))
                    self._answer(403, "Forbidden", [("Content-Type", "application/xml")], ACCESS_DENIED)
                    return
                upstream = http.client.HTTPConnection(store.upstream.hostname, store.upstream.port, timeout=120)
                try:
                    upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                    for name, value in self.headers.items():
                        upstream.putheader(name, value)
                    upstream.endheaders(body if body or self.headers.get("Content-Length") else None)
                    answer = upstream.getresponse()  # (an interim 100 Continue is read past)
                    data = answer.read()
                    headers = [(name, value) for name, value in answer.getheaders()
                               if name.lower() not in _NOT_PASSED_ON]
                    if self.command == "HEAD":  # the object's length, with no body
                        headers.append(("Content-Length", answer.getheader("Content-Length", "0")))
                    self._answer(answer.status, answer.reason, headers, data)
                finally:
                    upstream.close()

            def _answer(self, status: int, reason: str, headers: list[tuple[str, str]], data: bytes) -> None:
                self.send_response_only(status, reason)
                for name, value in headers:
                    self.send_header(name, value)
                if self.command != "HEAD":
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _pass_on

        return Handler
