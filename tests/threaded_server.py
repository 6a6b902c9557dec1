"""An ``http.server`` serving on a thread of its own for the length of a ``with`` block (a proxy, a
TLS endpoint, a folder of release files on loopback)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def serving(server: http.server.HTTPServer) -> Iterator[int]:
    """``server`` answering on a daemon thread until the block ends (then shut down and closed); its port."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
