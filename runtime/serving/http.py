"""The OpenAI-compatible HTTP server every serving worker shares, answering for one ``Generator``.

See docs/host-contract.md, "2. The API".
"""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import socket
import socketserver
import sys
import threading
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any, TextIO
from urllib.parse import unquote

from superfluid.runtime.kernel.errors import SuperfluidError
from superfluid.runtime.kernel.layout import worker_command
from superfluid.runtime.serving.completions import CompletionRequest, RequestRefused, parse_chat, parse_completion
from superfluid.runtime.serving.engine import Engine
from superfluid.runtime.serving.flags import DEFAULT_QUEUE
from superfluid.runtime.serving.generation import Generator, Run
from superfluid.runtime.serving.wire import RequestHandler

__all__ = ["make_server", "serve_engine", "metrics", "MAX_BODY", "IO_TIMEOUT", "DRAIN_SECONDS", "BACKLOG"]

#: the largest request body read, in bytes
MAX_BODY = 8 << 20
#: seconds a connection may stay silent (an idle keep-alive, a client that stopped reading a stream)
IO_TIMEOUT = 120.0
#: seconds a shutdown waits for the answers being written (the 503s of generations it stopped)
DRAIN_SECONDS = 10.0
#: connections the kernel holds before they are accepted (the stdlib's 5 reset a burst of clients)
BACKLOG = 1024


#: POST endpoint -> the parser of its body
_POSTS: dict[str, Callable[[bytes], CompletionRequest]] = {
    "/v1/completions": parse_completion,
    "/v1/chat/completions": parse_chat,
}
_ENDPOINTS = "POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health and GET /metrics"
_MODELS = "/v1/models"
_GETS = ("/health", "/metrics", _MODELS)


def metrics(generator: Generator) -> str:
    """``GET /metrics`` in Prometheus' text format: the sequences the engine decodes together, how
    many generate and wait now, its decode steps by the sequences each decoded (more than one:
    requests shared a step), and the prompt tokens decoded or found cached."""
    s = generator.stats()
    rows: list[tuple[str, str, str, list[tuple[str, int]]]] = [
        ("superfluid_sequences", "gauge", "sequences the engine decodes together in one step (1: one request at a "
                                          "time)", [("", s.sequences)]),
        ("superfluid_sequences_busy", "gauge", "sequences generating now", [("", s.busy)]),
        ("superfluid_requests_waiting", "gauge", "requests admitted and waiting for a sequence",
         [("", max(0, generator.admitted - s.busy))]),
        ("superfluid_decode_steps_total", "counter", "decode steps, by the sequences each decoded",
         [(f'{{sequences="{n}"}}', count) for n, count in sorted(s.steps.items())]),
        ("superfluid_prompt_tokens_total", "counter", "prompt tokens of the generations begun",
         [("", s.prompt_tokens)]),
        ("superfluid_prompt_tokens_cached_total", "counter", "prompt tokens a sequence already held (not decoded "
                                                             "again)", [("", s.cached_tokens)]),
        ("superfluid_generated_tokens_total", "counter", "tokens generated", [("", s.generated_tokens)]),
    ]
    out = []
    for name, kind, help_text, samples in rows:
        out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        out += [f"{name}{labels} {value}" for labels, value in samples]
    return "\n".join(out) + "\n"


def _peer_gone(conn: socket.socket) -> bool:
    """Whether the client closed its side of ``conn`` (readable, and nothing left to read); bytes
    waiting (a pipelined request) are not a close."""
    try:
        if not select.select([conn], [], [], 0)[0]:
            return False
        return conn.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class _Handler(RequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # the status line and headers go out before the body, in two writes: with Nagle's algorithm a
    # keep-alive client's delayed ACK held every answer for ~40 ms
    disable_nagle_algorithm = True
    # a client that stops reading a stream cannot hold the model for ever
    timeout = IO_TIMEOUT

    def version_string(self) -> str:
        return worker_command(self.server.generator.engine.runtime_id)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        if self.server.echo_log:
            super().log_message(format, *args)

    def _json(self, status: int, doc: Mapping[str, Any], *, close: bool = False,
              headers: Mapping[str, str] | None = None) -> None:
        self._body(status, (json.dumps(doc, separators=(",", ":")) + "\n").encode(), "application/json",
                   close=close, headers=headers)

    def _body(self, status: int, body: bytes, content_type: str, *, close: bool = False,
              headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Errors the stdlib raises itself (a malformed request line, a method nobody handles), as JSON."""
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "error"
        refused = RequestRefused(code, message or phrase)
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            self.request_version = "HTTP/1.0"  # an unparsable line: answer with a status line all the same
        self._json(code, refused.to_json(), close=True)

    def _guard(self, answer: Callable[[], None]) -> None:
        try:
            answer()
        except RequestRefused as e:
            self._json(e.status, e.to_json(), close=e.status in (411, 413), headers=e.headers)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True
        except Exception as e:  # noqa: BLE001 - a request never gets a traceback, only an error object
            self._json(500, RequestRefused(500, f"internal error: {type(e).__name__}: {e}",
                                           kind="server_error").to_json(), close=True)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self._guard(self._get)

    def do_HEAD(self) -> None:  # noqa: N802
        self._guard(self._get)

    def do_POST(self) -> None:  # noqa: N802
        with self.server.generator.answering():
            self._guard(self._post)

    def _method_not_allowed(self) -> None:
        self._json(405, RequestRefused(405, f"{self.command} is not allowed here").to_json(), close=True)

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _method_not_allowed  # noqa: N815

    def _path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/") or "/"

    def _get(self) -> None:
        path = self._path()
        if path == "/health":
            self._json(200, {"status": "ok"})
        elif path == "/metrics":
            self._body(200, metrics(self.server.generator).encode(), "text/plain; version=0.0.4; charset=utf-8")
        elif path == _MODELS:
            self._json(200, {"object": "list", "data": [self._model()]})
        elif path.startswith(_MODELS + "/"):
            self._served(unquote(path[len(_MODELS) + 1:]))
            self._json(200, self._model())
        elif path in _POSTS:
            raise RequestRefused(405, f"{path} takes POST")
        else:
            raise RequestRefused(404, f"no such endpoint: {path} (this server answers {_ENDPOINTS})", code="not_found")

    def _model(self) -> dict[str, Any]:
        generator = self.server.generator
        return {"id": generator.engine.model_id, "object": "model", "created": generator.created,
                "owned_by": generator.engine.runtime_id}

    def _served(self, model: str | None) -> None:
        """Refuse a request for a model this server does not serve (404, in OpenAI's shape)."""
        served = self.server.generator.engine.model_id
        if model is not None and model != served:
            raise RequestRefused(404, f"the model {model!r} does not exist here: this server serves {served!r} "
                                      f"(GET {_MODELS})", param="model", code="model_not_found")

    def _post(self) -> None:
        path = self._path()
        parse = _POSTS.get(path)
        if parse is None:
            if path in _GETS or path.startswith(_MODELS + "/"):
                raise RequestRefused(405, f"{path} takes GET")
            raise RequestRefused(404, f"no such endpoint: {path} (this server answers {_ENDPOINTS})", code="not_found")
        if self.headers.get("Transfer-Encoding"):
            raise RequestRefused(411, "send the body with a Content-Length (chunked bodies are not read)")
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise RequestRefused(411, "a Content-Length is required")
        if int(length) > MAX_BODY:
            raise RequestRefused(413, f"the body is {length} bytes; at most {MAX_BODY} are read")
        request = parse(self.rfile.read(int(length)))
        self._served(request.model)
        generator = self.server.generator

        def gone() -> bool:
            return _peer_gone(self.connection)

        if not request.stream:
            self._json(200, generator.complete(request, gone))
            return
        run = generator.start(request, gone)  # a refusal here is still an ordinary JSON answer
        try:
            self._stream(run)
        finally:
            run.close()

    def _send_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))

    def _event(self, doc: Mapping[str, Any]) -> None:
        self._send_chunk(b"data: " + json.dumps(doc, separators=(",", ":")).encode() + b"\n\n")

    def _stream(self, run: Run) -> None:
        """Server-sent events in a chunked response: the chunks, then ``[DONE]``; a failure once the
        stream has begun is an error event (the status line is already sent)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in run.events():
                self._event(event)
        except RequestRefused as e:
            self._event(e.to_json())
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            raise
        except Exception as e:  # noqa: BLE001 - a stream never gets a traceback, only an error event
            self._event(RequestRefused(500, f"internal error: {type(e).__name__}: {e}", kind="server_error").to_json())
            self.close_connection = True
        self._send_chunk(b"data: [DONE]\n\n")
        self._send_chunk(b"")


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = BACKLOG
    generator: Generator
    echo_log: bool = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a reset, a broken pipe: common as a server stops under a
        keep-alive client) is not a fault of ours; anything else is one line, never a traceback."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            return
        sys.stderr.write(f"serving: a request from {client_address[0]} failed: {error!r}\n")


class _Server6(_Server):
    address_family = socket.AF_INET6


def make_server(generator: Generator, host: str, port: int, *, echo_log: bool = False) -> _Server:
    """A server bound to ``host:port`` (0: a free port) answering for ``generator``; not yet serving.

    Raises:
        OSError: the address cannot be bound.
    """
    server = (_Server6 if ":" in host else _Server)((host, port), _Handler)
    server.generator = generator
    server.echo_log = echo_log
    return server


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve_engine(engine: Engine, host: str, port: int, out: TextIO, *, echo_log: bool = False,
                 queue: int = DEFAULT_QUEUE, gate: Callable[[], bool] | None = None) -> int:
    """Listen on ``host:port``, announce on ``out``, serve until SIGTERM/SIGINT; 0 on a clean close.

    ``queue`` requests may wait for a sequence besides those generating (one, or the engine's
    ``Batched.n_seq``). ``gate``, given, is asked before anything binds: no (the engine loaded ahead of
    its face's decision, and the face chose otherwise) closes the engine and answers 0. The engine is
    closed on every way out, including a failure to bind.

    Raises:
        SuperfluidError: the address cannot be bound, the ready line cannot be written, or serving
            failed (exit 1).
    """
    if gate is not None and not gate():
        engine.close()
        return 0
    generator = Generator(engine, queue=queue)
    try:
        server = make_server(generator, host, port, echo_log=echo_log)
    except OSError as e:
        generator.close()
        advice = "give another --port, or --port 0 for a free one" if e.errno == errno.EADDRINUSE else None
        raise SuperfluidError(f"cannot listen on {host}:{port}: {e.strerror or e}", advice=advice) from e
    # the main thread sleeps on a pipe that a signal or a failure writes to: a handler that set an Event
    # could deadlock, arriving while the main thread held the Event's own lock in its wait
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)

    def wake(*_: object) -> None:
        try:
            os.write(wake_w, b"!")
        except OSError:
            pass  # woken already

    previous = {s: signal.signal(s, wake) for s in (signal.SIGTERM, signal.SIGINT)}
    failure: list[BaseException] = []

    def run() -> None:
        try:
            server.serve_forever(poll_interval=0.2)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            failure.append(e)
            wake()

    thread = threading.Thread(target=run, name="serve", daemon=True)
    thread.start()
    try:
        bound_host, bound_port = server.server_address[:2]
        ready = {"listening": _url(str(bound_host), int(bound_port)), "model": engine.model_id,
                 "path": os.path.abspath(engine.model_path), **engine.facts(), "n_ctx": engine.n_ctx,
                 "parallel": generator.sequences}
        try:
            out.write(json.dumps(ready) + "\n")
            out.flush()
        except (OSError, ValueError) as e:
            raise SuperfluidError(f"cannot announce the address on stdout: {e}") from e
        select.select([wake_r], [], [])
    finally:
        generator.closing.set()
        server.shutdown()
        server.server_close()
        generator.close()
        generator.drain(DRAIN_SECONDS)
        for s, handler in previous.items():
            signal.signal(s, handler)
        os.close(wake_r)
        os.close(wake_w)
    if failure:
        raise SuperfluidError(f"serving failed: {type(failure[0]).__name__}: {failure[0]}")
    return 0
