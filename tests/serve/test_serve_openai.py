"""``superfluid serve`` as a real process on a loopback port, driven by the official ``openai`` client.

basert: the reference engine installed from a local release mirror (``scripts/make-mirror``), so
the startup line names the install; its tiny model continues "once upon" to a known sentence.
llama.cpp: the real v1 and v2 libllama named with ``--llamacpp-lib``, the deterministic GGUF
(``always-the``: greedy text is `` the`` repeated) and a random one for sampling. Each server is
stopped with SIGTERM or SIGINT: exit 0, and no process left behind (its worker included).

The client talks to loopback only: its base URL is the server's, it reads no proxy from the
environment, and it never retries.
"""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import cli
from tests.conftest import ROOT, native_cache
from tests.serving_client import SuperfluidServe, alive

openai = pytest.importorskip("openai")

BASERT = native_cache() / "basert"
COMPLETION = " a time the tiny reference engine spoke plainly and stopped"


def client(server: SuperfluidServe) -> Any:
    assert server.host in ("127.0.0.1", "::1", "localhost")
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="not-a-key", max_retries=0, timeout=60,
                         http_client=openai.DefaultHttpxClient(trust_env=False))


def start(home: Path, *args: str | Path) -> SuperfluidServe:
    return SuperfluidServe([cli.script("superfluid"), "serve", "--port", "0", *map(str, args)], cli.environment(home))


def stop_cleanly(server: SuperfluidServe, sig: int = signal.SIGTERM) -> None:
    """Stop it with ``sig``: exit 0, its worker gone too, the port closed."""
    workers = server.children()
    assert len(workers) == 1, f"one worker expected, found {workers}"
    code, out, err = server.stop(sig)
    assert code == 0, err
    assert "Traceback" not in err
    assert not any(alive(pid) for pid in workers), "the worker outlived its server"
    with pytest.raises(OSError):
        socket.create_connection((server.host, server.port), timeout=5).close()


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with basert installed from a local mirror of the reference engine's releases (0.4.0, ABI 1)."""
    base = tmp_path_factory.mktemp("installed")
    mirror, home = base / "mirror", base / "home"
    home.mkdir()
    made = subprocess.run(["bash", str(ROOT / "scripts" / "make-mirror"), str(mirror)], capture_output=True,
                          text=True, timeout=300, check=False, stdin=subprocess.DEVNULL)
    assert made.returncode == 0, made.stderr
    done = cli.run("superfluid", "runtime", "install", "basert", "--mirror", mirror, env=cli.environment(home),
                   timeout=300)
    assert done.code == 0, done.stderr
    return home


@pytest.fixture
def basert_server(installed: Path) -> Iterator[SuperfluidServe]:
    s = start(installed, "--model", BASERT / "models" / "tiny.base")
    yield s
    s.close()


def test_the_startup_line_says_what_serves_and_from_where(basert_server: SuperfluidServe, installed: Path) -> None:
    assert basert_server.ready["line"] == (
        f"superfluid: basert 0.4.0 (ABI 1) serves tiny.base on http://127.0.0.1:{basert_server.port} "
        f"(installed: {installed / 'runtimes' / 'basert' / '0.4.0-cpu'})")


def test_basert_completions_through_the_openai_client(basert_server: SuperfluidServe) -> None:
    c = client(basert_server)
    answer = c.completions.create(model="tiny", prompt="once upon", max_tokens=64, temperature=0)
    assert answer.choices[0].text == COMPLETION and answer.choices[0].finish_reason == "stop"
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (3, 11)
    chunks = list(c.completions.create(model="tiny", prompt="once upon", max_tokens=64, stream=True,
                                       stream_options={"include_usage": True}))
    texts = [ch.choices[0].text for ch in chunks if ch.choices]
    assert "".join(texts) == COMPLETION
    assert len([t for t in texts if t]) == 10  # one chunk per word: streamed as generated
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 11
    assert [m.id for m in c.models.list()] == ["tiny"]
    stop_cleanly(basert_server)


def test_basert_refuses_sampling_and_chat_with_a_400(basert_server: SuperfluidServe) -> None:
    c = client(basert_server)
    with pytest.raises(openai.BadRequestError, match="decodes greedily only"):
        c.completions.create(model="tiny", prompt="once upon", temperature=0.8)
    with pytest.raises(openai.BadRequestError, match="carries no chat template"):
        c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "once upon"}])
    assert c.completions.create(model="tiny", prompt="the tiny").choices[0].text == (
        " reference engine spoke plainly and stopped")  # and it keeps serving


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_a_body_nested_10000_deep_is_a_400_and_the_server_keeps_serving(basert_server: SuperfluidServe,
                                                                        path: str) -> None:
    deep = b'{"prompt": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"
    status, answer = basert_server.request("POST", path, deep)
    assert status == 400, answer
    assert "nested too deeply" in answer["error"]["message"] and answer["error"]["type"] == "invalid_request_error"
    assert basert_server.complete(model="tiny", prompt="once upon", max_tokens=2)["choices"][0]["text"] == " a time"


def test_a_named_install_serves_and_sigint_stops_it(installed: Path) -> None:
    s = start(installed, "--model", BASERT / "models" / "tiny.base", "--runtime", "basert@0.4.0-cpu")
    try:
        assert s.ready["where"] == f"installed: {installed / 'runtimes' / 'basert' / '0.4.0-cpu'}"
        assert client(s).completions.create(model="tiny", prompt="once upon", max_tokens=2).choices[0].text == " a time"
        stop_cleanly(s, signal.SIGINT)
    finally:
        s.close()


def test_one_server_per_sessions_directory(installed: Path, tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    first = start(installed, "--model", BASERT / "models" / "tiny.base", "--sessions", sessions)
    try:
        second = cli.run("superfluid", "serve", "--model", BASERT / "models" / "tiny.base", "--port", "0",
                         "--sessions", sessions, env=cli.environment(installed), timeout=60)
        assert second.code == 2, second.stderr
        assert second.stderr.startswith(f"superfluid: --sessions {sessions} is held by another server (pid "
                                        f"{first.proc.pid} (superfluid serve)")
        assert f"kill {first.proc.pid}" in second.stderr
        stop_cleanly(first)
    finally:
        first.close()
    again = start(installed, "--model", BASERT / "models" / "tiny.base", "--sessions", sessions)
    try:
        stop_cleanly(again)  # the directory is free once its server stopped
    finally:
        again.close()


@pytest.mark.native
def test_llamacpp_greedy_text_exactly_streamed_and_not(libllama_each: Path, gguf_models: dict[str, Path],
                                                       tmp_path: Path) -> None:
    s = start(tmp_path, "--model", gguf_models["always-the.gguf"], "--llamacpp-lib", libllama_each)
    try:
        assert s.ready["runtime"] == "llamacpp" and s.ready["model"] == "always-the.gguf"
        assert s.ready["version"].endswith(f"({libllama_each.name})")
        assert s.ready["where"] == f"library: {libllama_each / 'libllama.so'}, named by --llamacpp-lib"
        c = client(s)
        answer = c.completions.create(model="always-the", prompt="Once upon a time", max_tokens=7, temperature=0)
        assert answer.choices[0].text == " the" * 7 and answer.choices[0].finish_reason == "length"
        assert answer.usage.completion_tokens == 7
        streamed = [ch.choices[0].text for ch in c.completions.create(
            model="always-the", prompt="Once upon a time", max_tokens=7, temperature=0, stream=True)]
        assert "".join(streamed) == " the" * 7 and streamed.count(" the") == 7
        stop = c.completions.create(model="always-the", prompt="x", max_tokens=10, stop=["e t"])
        assert stop.choices[0].text == " th" and stop.choices[0].finish_reason == "stop"
        stream_stop = "".join(ch.choices[0].text for ch in c.completions.create(
            model="always-the", prompt="x", max_tokens=10, stop=["e t"], stream=True))
        assert stream_stop == " th"  # " the" was held back until the stop string could be ruled out
        stop_cleanly(s)
    finally:
        s.close()


@pytest.mark.native
def test_llamacpp_sampling_is_seeded(libllama_each: Path, gguf_models: dict[str, Path], tmp_path: Path) -> None:
    s = start(tmp_path, "--model", gguf_models["tiny-f32.gguf"], "--llamacpp-lib", libllama_each)
    try:
        c = client(s)

        def text(**kw: Any) -> str:
            return str(c.completions.create(model="tiny-f32", prompt="the cat", max_tokens=12, **kw).choices[0].text)

        greedy = text(temperature=0)
        drawn = {seed: text(temperature=1.0, seed=seed) for seed in (1, 2, 3)}
        assert drawn[1] == text(temperature=1.0, seed=1)  # same seed, same text
        assert len(set(drawn.values())) > 1, drawn  # near-uniform logits: the seed decides
        assert text(temperature=1.0, seed=7, extra_body={"top_k": 1}) == greedy  # one candidate left: the argmax
        assert text(temperature=0, seed=9) == greedy  # no temperature: greedy, whatever the seed
        streamed = "".join(ch.choices[0].text for ch in c.completions.create(
            model="tiny-f32", prompt="the cat", max_tokens=12, temperature=1.0, seed=2, stream=True))
        assert streamed == drawn[2]
        stop_cleanly(s)
    finally:
        s.close()


@pytest.mark.native
def test_llamacpp_chat_uses_the_models_template(libllama_each: Path, gguf_models: dict[str, Path],
                                                tmp_path: Path) -> None:
    s = start(tmp_path, "--model", gguf_models["chat-always-the.gguf"], "--llamacpp-lib", libllama_each)
    try:
        c = client(s)
        messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]
        answer = c.chat.completions.create(model="chat-always-the", messages=messages, max_tokens=3, temperature=0)
        assert answer.object == "chat.completion"
        assert answer.choices[0].message.role == "assistant" and answer.choices[0].message.content == " the the the"
        # the ChatML text llama.cpp's own formatter makes, tokenized byte by byte by the tiny vocabulary
        formatted = "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
        plain = c.completions.create(model="chat-always-the", prompt=formatted, max_tokens=1)
        assert answer.usage.prompt_tokens == plain.usage.prompt_tokens
        deltas = list(c.chat.completions.create(model="chat-always-the", messages=messages, max_tokens=2, stream=True))
        assert deltas[0].choices[0].delta.role == "assistant"
        assert "".join(d.choices[0].delta.content or "" for d in deltas) == " the the"
        assert deltas[-1].choices[0].finish_reason == "length"
        stop_cleanly(s)
    finally:
        s.close()
    plain_model = start(tmp_path, "--model", gguf_models["always-the.gguf"], "--llamacpp-lib", libllama_each)
    try:
        with pytest.raises(openai.BadRequestError, match="carries no chat template"):
            client(plain_model).chat.completions.create(model="always-the",
                                                        messages=[{"role": "user", "content": "hi"}])
        stop_cleanly(plain_model)
    finally:
        plain_model.close()
