"""The conformance kit's serve check: a worker's ``serve`` started, asked and stopped as a host does.

See docs/adapters.md, "The conformance kit".
"""

from __future__ import annotations

# The kit asks the server it started on loopback as a host would, with the standard library's HTTP
# client: a test of a worker, not a download, so not through the installer's fetcher (which the
# runtime layer never imports).
import http.client
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from superfluid.runtime.kernel.jsonread import UntrustedJson, loads
from superfluid.runtime.kernel.options import to_argv

if TYPE_CHECKING:
    from superfluid.runtime.adapter import Adapter

__all__ = ["serve_faults", "PROMPT", "MAX_TOKENS"]

#: seconds the worker may take to load the model and say it listens, to answer, and to stop
_TIMEOUT = 120.0
#: bytes of a ready line or an answer read
_MAX_BYTES = 4 << 20
#: the prompt of the one completion the kit asks for, and the tokens it may make
PROMPT, MAX_TOKENS = "Hello", 4


def _get(conn: http.client.HTTPConnection, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One request to the worker's server: the status and the JSON answer (None when it is not JSON)."""
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    resp = conn.getresponse()
    raw = resp.read(_MAX_BYTES + 1)
    try:
        return resp.status, loads(raw, max_bytes=_MAX_BYTES)
    except UntrustedJson:
        return resp.status, None


def _ready_line(proc: subprocess.Popen[bytes], out: str) -> Any:
    """The first line ``proc`` writes to the file ``out`` (the ready line), or None when it exits or
    the time runs out first."""
    deadline = time.monotonic() + _TIMEOUT
    while time.monotonic() < deadline:
        with open(out, "rb") as f:
            text = f.read(_MAX_BYTES)
        if b"\n" in text:
            try:
                return loads(text.split(b"\n", 1)[0], max_bytes=_MAX_BYTES)
            except UntrustedJson:
                return None
        if proc.poll() is not None:
            return None
        time.sleep(0.05)
    return None


def _ready_faults(ready: Any, model: str) -> list[str]:
    """Faults of the ready line: ``{"listening", "model", "path", ..., "n_ctx"}``, listening where asked."""
    if not isinstance(ready, Mapping) or not {"listening", "model", "path", "n_ctx"} <= set(ready):
        return [f"its ready line lacks one of listening, model, path, n_ctx: {ready!r}"]
    found = []
    if ready["path"] != os.path.abspath(model):
        found.append(f"its ready line's path is {ready['path']!r}, not {os.path.abspath(model)!r}")
    if not isinstance(ready["n_ctx"], int) or ready["n_ctx"] < 1:
        found.append(f"its ready line's n_ctx is {ready['n_ctx']!r}, not a count of tokens")
    where = urlsplit(str(ready["listening"]))
    if where.scheme != "http" or where.hostname != "127.0.0.1" or not where.port:
        found.append(f"it listens on {ready['listening']!r}, not http://127.0.0.1:<port> as asked")
    return found


def _first(doc: Any, key: str) -> Mapping[str, Any]:
    """``doc[key][0]`` when it is an object, else ``{}``."""
    items = doc.get(key) if isinstance(doc, Mapping) else None
    return items[0] if isinstance(items, list) and items and isinstance(items[0], Mapping) else {}


def _answer_faults(rid: str, port: int, model_id: Any) -> list[str]:
    """Faults of the answers to ``GET /v1/models`` and one ``POST /v1/completions``."""
    found = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=_TIMEOUT)
    try:
        status, models = _get(conn, "GET", "/v1/models")
        listed = _first(models, "data")
        if status != 200 or listed.get("id") != model_id or listed.get("owned_by") != rid:
            found.append(f"GET /v1/models answers {status} {models!r}, not its model {model_id!r} owned by {rid}")
        status, done = _get(conn, "POST", "/v1/completions",
                            {"model": model_id, "prompt": PROMPT, "max_tokens": MAX_TOKENS})
        choice = _first(done, "choices")
        usage = done.get("usage") if isinstance(done, Mapping) else None
        made = usage.get("completion_tokens") if isinstance(usage, Mapping) else None
        if status != 200 or not isinstance(choice.get("text"), str) or not isinstance(made, int) or \
                not 1 <= made <= MAX_TOKENS or choice.get("finish_reason") not in ("stop", "length"):
            found.append(f"POST /v1/completions of {PROMPT!r} (max_tokens {MAX_TOKENS}) answers {status} {done!r}")
    except (OSError, http.client.HTTPException) as e:
        found.append(f"its server on port {port} does not answer: {e}")
    finally:
        conn.close()
    return found


def serve_faults(adapter: Adapter, worker: Sequence[str], env: Mapping[str, str], folder: str, model: str,
                 options: Mapping[str, Any] | None = None) -> list[str]:
    """What is wrong with the worker's ``serve`` of ``model``, run as ``superfluid serve`` runs it
    (docs/adapters.md, "The conformance kit", 6): on a free loopback port, ``options`` in serve's
    spelling; it prints its ready line, answers ``GET /v1/models`` and one ``POST /v1/completions``,
    and exits 0 on SIGTERM."""
    rid = adapter.id
    argv = [*worker, "serve", "--model", model, "--host", "127.0.0.1", "--port", "0",
            *to_argv(dict(options or {}), prefix=f"{rid}-")]
    out, err = os.path.join(folder, "serve.out"), os.path.join(folder, "serve.err")
    try:
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            proc = subprocess.Popen(argv, env=dict(env), stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
    except OSError as e:
        return [f"{rid}: serve could not start: {e}"]
    try:
        ready = _ready_line(proc, out)
        found = _ready_faults(ready, model) if ready is not None else ["serve printed no ready line (one line of JSON)"]
        if ready is not None and not found:
            found = _answer_faults(rid, int(urlsplit(ready["listening"]).port or 0), ready["model"])
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
    if ready is None or code != 0:
        with open(err, encoding="utf-8", errors="replace") as f:
            said = f.read()[-300:].strip()
        found.append(f"serve exits {code}" + (" on SIGTERM, not 0" if ready is not None else "") + f": {said!r}")
    return [f"{rid}: {f}" for f in found]
