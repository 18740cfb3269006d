"""Sockets on 127.0.0.1 for the local stack: a free port, whether a port is taken, and the
https-subscriber stand-in that keeps what SNS sends to a chat channel."""

from __future__ import annotations

from typing import Any


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def port_taken(port: int) -> bool:
    """Something holds the port on 127.0.0.1 (a server could not listen there)."""
    import socket

    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


class CaptureServer:
    """An https-subscriber stand-in on 127.0.0.1 that keeps every body it is sent."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        bodies: list[bytes] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                bodies.append(self.rfile.read(length))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                return None

        self.bodies = bodies
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A short poll: `shutdown` waits for the loop to look (0.5 s by default, per stack).
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_port}/chat"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
