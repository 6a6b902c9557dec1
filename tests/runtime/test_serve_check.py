"""``runtime/serve_check``: the conformance kit's serve check (issue 43, point 8) — a real worker's
``serve`` started on a loopback port passes it, given its options in serve's spelling; a worker that
prints no ready line, points at a port where nothing answers, lacks a key of the ready line, lists
another runtime's model or makes more tokens than asked fails it, naming the fault."""

from __future__ import annotations

from pathlib import Path

import pytest

from superfluid.runtime import registry
from superfluid.runtime.kernel.layout import worker_command
from superfluid.runtime.serve_check import MAX_TOKENS, serve_faults
from tests import cli
from tests.declarations.conftest import fake_worker


def test_a_real_worker_serves_as_a_host_asks(home: Path, tmp_path: Path, engines: Path) -> None:
    """basert's worker, its library named by an option in serve's spelling (``--basert-lib``)."""
    worker = [cli.script(worker_command("basert"))]
    model = str(engines / "models" / "tiny.base")
    options = {"lib": str(engines / "0.4.0"), "kv-bits": 8}
    assert serve_faults(registry.get("basert"), worker, cli.environment(home), str(tmp_path), model, options) == []


#: a worker whose serve answers as $SERVE says: a server of its own, a ready line of its own, or nothing
FAKE = """
import http.server, signal, threading
mode = os.environ["SERVE"]
if args[:1] != ["serve"]:
    sys.exit(2)
model = os.path.abspath(args[args.index("--model") + 1])
if mode == "exit":
    sys.stderr.write("w: no model here\\n")
    sys.exit(2)
if mode in ("nobody", "lacking"):
    ready = {"listening": "http://127.0.0.1:9", "model": "m", "path": model, "n_ctx": 8}
    if mode == "lacking":
        ready.pop("n_ctx")
    print(json.dumps(ready), flush=True)
    time.sleep(60)


class Answer(http.server.BaseHTTPRequestHandler):
    def _json(self, doc):
        body = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self._json({"object": "list", "data": [{"id": "m", "owned_by": "other" if mode == "owner" else "llamacpp"}]})

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        made = 9 if mode == "many" else 1
        self._json({"choices": [{"text": "x", "finish_reason": "length"}], "usage": {"completion_tokens": made}})

    def log_message(self, *a):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
print(json.dumps({"listening": f"http://127.0.0.1:{server.server_port}", "model": "m", "path": model, "n_ctx": 8}),
      flush=True)
server.serve_forever()
"""


@pytest.mark.parametrize(("mode", "said"), [
    pytest.param("good", [], id="good"),
    pytest.param("exit", ["llamacpp: serve printed no ready line (one line of JSON)",
                          "llamacpp: serve exits 2: 'w: no model here'"], id="no-ready-line"),
    pytest.param("nobody", ["llamacpp: its server on port 9 does not answer: ",
                            "llamacpp: serve exits -15 on SIGTERM, not 0: ''"], id="nobody-listens"),
    pytest.param("lacking", ["llamacpp: its ready line lacks one of listening, model, path, n_ctx: ",
                             "llamacpp: serve exits -15 on SIGTERM, not 0"], id="a-key-lacking"),
    pytest.param("owner", ["llamacpp: GET /v1/models answers 200 "], id="another-runtimes-model"),
    pytest.param("many", [f"llamacpp: POST /v1/completions of 'Hello' (max_tokens {MAX_TOKENS}) answers 200 "],
                 id="more-tokens-than-asked"),
])
def test_a_serve_fault_is_named(home: Path, tmp_path: Path, mode: str, said: list[str]) -> None:
    worker = fake_worker(tmp_path / "fake", FAKE)
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    found = serve_faults(registry.get("llamacpp"), [str(worker)], cli.environment(home, SERVE=mode), str(tmp_path),
                         str(tmp_path / "m.gguf"))
    assert len(found) == len(said) and all(f.startswith(s) for f, s in zip(found, said, strict=True)), found
