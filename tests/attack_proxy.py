"""A reverse proxy for attack tests: it forwards every request to an upstream server and
passes each response through `tamper(path, body) -> body`, as a compromised server, CDN or
network in front of the aggregator could; the files in `extra` (path: (type, body)) it serves
itself."""

import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Tamper = Callable[[str, bytes], bytes]
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "date", "server"}


def untouched(_path: str, body: bytes) -> bytes:
    return body


@contextmanager
def attack_proxy(upstream: str) -> Iterator["Proxy"]:
    """A proxy on a loopback port in front of `upstream`; set its `tamper` to attack."""
    proxy = Proxy(upstream)
    server = ThreadingHTTPServer(("127.0.0.1", 0), proxy.handler())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01},
                              daemon=True)
    thread.start()
    proxy.url = f"http://127.0.0.1:{server.server_port}"
    try:
        yield proxy
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


class Proxy:
    def __init__(self, upstream: str):
        self.upstream = upstream
        self.url = ""
        self.tamper: Tamper = untouched
        self.extra: dict[str, tuple[str, bytes]] = {}

    def handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self.forward(None)

            def do_POST(self):
                self.forward(self.rfile.read(int(self.headers.get("Content-Length", 0))))

            def forward(self, data: bytes | None):
                if self.path in proxy.extra:
                    self.reply(200, {"Content-Type": proxy.extra[self.path][0]}.items(),
                               proxy.extra[self.path][1])
                    return
                headers = {name: value for name, value in self.headers.items()
                           if name.lower() not in HOP_BY_HOP | {"host"}}
                request = urllib.request.Request(proxy.upstream + self.path, data=data,
                                                 headers=headers, method=self.command)
                try:
                    with urllib.request.urlopen(request) as response:
                        status, reply, body = response.status, response.headers, response.read()
                except urllib.error.HTTPError as exc:
                    status, reply, body = exc.code, exc.headers, exc.read()
                self.reply(status, reply.items(), proxy.tamper(self.path, body))

            def reply(self, status, headers, body: bytes):
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in HOP_BY_HOP:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args):
                pass

        return Handler
