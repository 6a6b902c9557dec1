"""``superfluid serve``'s exit codes, each case a real process (SPEC §6.1; docs/host-contract.md).

2: the line is wrong, refused before anything is looked up or started: a fake worker named by
``SUPERFLUID_WORKER_<ID>`` for every runtime writes a marker when started, and no case here
starts it. 4: the runtime is not installed or cannot run here (the check's reason and the
command that fixes it; nothing fetched, ``--offline`` or not). 3: the worker could not load the
model (its reason). 1: the worker could not serve (the address). Every flag a hint names is a
flag ``serve`` takes.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from superfluid.runtime import registry
from tests import cli
from tests.conftest import native_cache

BASERT = native_cache() / "basert"
LIB = "libbaseRT.so"


def serve(env: dict[str, str], *args: str | Path, timeout: float = 60) -> cli.Run:
    return cli.run("superfluid", "serve", *args, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def tiny() -> Path:
    model = BASERT / "models" / "tiny.base"
    if not model.exists():
        pytest.fail(f"{model} is missing: run scripts/build-native")
    return model


@pytest.fixture
def spy(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """``SUPERFLUID_WORKER_<ID>`` of every runtime: a script that leaves a marker when started."""
    marker = tmp_path / "a-worker-started"
    script = tmp_path / "spy-worker"
    script.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {marker}\nexit 1\n")
    script.chmod(0o755)
    return {registry.env_override(rid): str(script) for rid in registry.IDS}, marker


@pytest.mark.parametrize(("args", "says"), [
    pytest.param(["--model", "{tiny}", "--bogus", "1"], "unknown flag --bogus: not a serve flag, nor "
                 f"--<runtime>-<option> of a runtime this superfluid ships ({', '.join(registry.IDS)})",
                 id="unknown-flag"),
    pytest.param(["--model", "{tiny}", "--port", "65536"], "--port '65536': expected an integer from 0 to 65535",
                 id="bad-port"),
    pytest.param(["--model", "{tiny}", "--basert-kv-bits", "3"], "--basert-kv-bits '3': expected one of 0, 4, 8, 16, "
                 "84", id="bad-basert-option"),
    pytest.param(["--model", "{tiny}", "--llamacpp-threads", "0"], "--llamacpp-threads '0': expected an integer "
                 "from 1 to 1024", id="bad-option-of-another-runtime"),
    pytest.param(["--model", "{tiny}", "--llamacpp-bogus", "1"], "--llamacpp-bogus: no such option",
                 id="no-such-option"),
    pytest.param(["--model", "{tiny}", "--queue", "-1"], "--queue '-1': expected an integer from 0 to 4096",
                 id="bad-queue"),
    pytest.param(["--model", "{tiny}", "--max-context", "0"], "--max-context '0': expected an integer from 1",
                 id="bad-max-context"),
    pytest.param(["--model", "{tiny}", "--runtime", "vllm"], "no runtime 'vllm'; this superfluid ships: basert, "
                 "llamacpp, mlx", id="unknown-runtime"),
    pytest.param(["--model", "{tiny}", "--runtime", "basert@../x"], "'../x' is not an install name",
                 id="bad-install-name"),
    pytest.param(["--model", "{tiny}", "--offline=yes"], "--offline takes no value", id="switch-with-value"),
    pytest.param(["--model", "{tiny}", "--port", "1", "--port", "2"], "--port is given twice", id="twice"),
    pytest.param(["--port", "0"], "serve needs --model PATH", id="no-model"),
    pytest.param(["--model", "{missing}"], "--model {missing}: no such file or directory", id="missing-model"),
    pytest.param(["--model", "{tiny}", "stray"], "unexpected argument 'stray'", id="stray-argument"),
    pytest.param(["--model", "{unclaimed}"], "no runtime reads the model {unclaimed}: basert reads a baseRT model file "
                 "(starts with BASE, or .base); llamacpp reads a GGUF file (starts with GGUF, or .gguf); mlx reads an "
                 "MLX model directory (holding config.json, *.safetensors); name the runtime with --runtime ID",
                 id="no-runtime-reads-it"),
])
def test_a_wrong_line_exits_2_and_starts_no_worker(home: Path, tmp_path: Path, tiny: Path,
                                                   spy: tuple[dict[str, str], Path], args: list[str],
                                                   says: str) -> None:
    unclaimed = tmp_path / "notes.txt"
    unclaimed.write_text("not a model\n")
    names = {"tiny": str(tiny), "missing": str(tmp_path / "missing.gguf"), "unclaimed": str(unclaimed)}
    overrides, marker = spy
    done = serve(cli.environment(home, **overrides), *(a.format(**names) for a in args))
    assert done.code == 2, done.stderr
    assert done.stdout == "" and done.stderr.startswith(f"superfluid: {says.format(**names)}"), done.stderr
    assert "Traceback" not in done.stderr
    assert not marker.exists(), "a worker was started for a line that is wrong"
    assert os.listdir(home) == [], "a wrong line changed the home"


def test_help_names_every_flag_and_option(home: Path) -> None:
    done = serve(cli.environment(home), "--help")
    assert done.code == 0
    for flag in ("--model PATH", "--runtime ID[@INSTALL]", "--basert-lib", "--llamacpp-lib", "--offline",
                 "--sessions DIR", "--host H", "--port N", "--llamacpp-n-gpu-layers", "--mlx-venv"):
        assert flag in done.stdout, flag
    assert "exit codes:" in done.stdout


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[dict[str, str], list[int]]]:
    """A loopback listener named as the mirror and the GitHub API: it counts every connection."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    connections: list[int] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            connections.append(1)
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    yield {"SUPERFLUID_MIRROR": url, "SUPERFLUID_GITHUB_API": url}, connections
    stop.set()
    thread.join(2)
    listener.close()


@pytest.mark.parametrize("offline", [True, False], ids=["offline", "online"])
def test_a_runtime_not_installed_exits_4_and_fetches_nothing(home: Path, tiny: Path, offline: bool,
                                                             no_network: tuple[dict[str, str], list[int]]) -> None:
    urls, connections = no_network
    done = serve(cli.environment(home, **urls), "--model", tiny, *(["--offline"] if offline else []))
    assert done.code == 4, done.stderr
    assert done.stderr.startswith("superfluid: libbaseRT not found (looked in ")
    kept = ("--offline",) if offline else ()  # the hint keeps the --offline serve was given
    assert "): name one with --basert-lib or BASERT_LIB" in done.stderr
    assert done.fix("install", "basert").argv == ("superfluid", "runtime", "install", "basert", *kept)
    assert done.stderr.rstrip().endswith(f"`superfluid runtime install basert{' --offline' if offline else ''}` "
                                         "installs it")
    assert connections == [] and done.stdout == ""


def hinted_flags(text: str) -> list[str]:
    """The flags a message names (``--basert-lib``...)."""
    return re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text)


def assert_serve_takes(flags: list[str], model: Path) -> None:
    """Each flag parses on serve's line (the face's tree) and its checks take it."""
    from superfluid.commands.serve import flags_of
    from superfluid.parser import parser
    from superfluid.serve_line import parse_line

    for flag in flags:
        line = ["serve", "--model", str(model), flag, *(["x"] if flag != "--offline" else [])]
        args, extra = parser(line).parse_known_args(line)
        assert extra == [] and args.unknown == [], flag
        parse_line(flags_of(args))


@pytest.mark.parametrize(("lib", "says"), [
    pytest.param("0.5.0", "libbaseRT at {lib} states ABI 2; this superfluid drives ABI 1", id="another-abi"),
    pytest.param("0.2.6", "only the unnumbered 0.3.x line carries ABI 1", id="unnumbered-off-the-line"),
    pytest.param("missing-symbol", "lacks baseRT_decode_step", id="missing-symbol"),
    pytest.param("nowhere", "--basert-lib names {lib}, which does not exist", id="named-nothing"),
])
def test_a_basert_library_this_build_does_not_drive_exits_4(home: Path, tiny: Path, lib: str, says: str) -> None:
    path = BASERT / lib / LIB
    done = serve(cli.environment(home), "--model", tiny, "--basert-lib", path)
    assert done.code == 4, done.stderr
    assert done.stderr.startswith("superfluid: ") and says.format(lib=path) in done.stderr
    flags = hinted_flags(done.stderr)
    assert "--basert-lib" in flags
    assert_serve_takes(flags, tiny)  # every flag the hint names is one serve takes


def test_a_llamacpp_of_an_unknown_layout_exits_4(home: Path, tmp_path: Path) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc) to build the stand-in library")
    from superfluid.runtime.llamacpp import layout as L
    from tests.llamacpp.stubs import older_defaults, stub_library

    lib = stub_library(tmp_path, older_defaults(), L.default_image(L.LAYOUTS[1])[1][:80])
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 60)
    done = serve(cli.environment(home), "--model", model, "--llamacpp-lib", lib)
    assert done.code == 4, done.stderr
    assert done.stderr.startswith(f"superfluid: {lib} is a llama.cpp this adapter cannot drive: its parameter structs "
                                  "are laid out as no tested build's are (")
    assert "`superfluid runtime install llamacpp`" in done.stderr
    assert_serve_takes(hinted_flags(done.stderr), model)


def test_llamacpp_not_installed_exits_4_naming_the_flag(home: Path, tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 60)
    done = serve(cli.environment(home), "--model", model)
    assert done.code == 4, done.stderr
    assert done.stderr.startswith("superfluid: llama.cpp not found (looked for libllama.so in ")
    assert "--llamacpp-lib or SUPERFLUID_LLAMA_LIB" in done.stderr
    assert_serve_takes(hinted_flags(done.stderr), model)


def test_mlx_off_apple_silicon_exits_4(home: Path, tmp_path: Path) -> None:
    model = tmp_path / "mlx-model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"\0" * 16)
    env = cli.environment(home, SUPERFLUID_HOST_OS="linux", SUPERFLUID_HOST_ARCH="x64")
    done = serve(env, "--model", model)
    assert done.code == 4, done.stderr
    assert done.stderr.startswith("superfluid: MLX runs on Apple silicon only (macos-arm64); this is Linux")


def test_an_install_that_is_not_there_exits_4(home: Path, tiny: Path) -> None:
    done = serve(cli.environment(home), "--model", tiny, "--runtime", "basert@0.3.0-cpu")
    assert done.code == 4, done.stderr
    assert done.stderr == ("superfluid: basert@0.3.0-cpu is not installed (installs of basert here: none): `superfluid "
                           "runtime install basert --version 0.3.0 --backend cpu` installs 0.3.0-cpu; or `superfluid "
                           "runtime list basert` lists its installs\n")


@pytest.mark.parametrize(("content", "says"), [
    pytest.param(b"BASE\x01", "libbaseRT at {lib} could not load the model {model}", id="truncated-base"),
    pytest.param(b"GGUF" + b"\0" * 60, "{model} is not a baseRT model (it does not start with BASE)",
                 id="gguf-named-for-basert"),
])
def test_a_model_that_does_not_load_exits_3_with_the_workers_reason(home: Path, tmp_path: Path, content: bytes,
                                                                   says: str) -> None:
    model = tmp_path / "broken.base"
    model.write_bytes(content)
    lib = BASERT / "0.4.0" / LIB
    done = serve(cli.environment(home), "--model", model, "--runtime", "basert", "--basert-lib", lib, "--port", "0")
    assert done.code == 3, done.stderr
    assert done.stderr.startswith(f"superfluid: the model did not load: {says.format(lib=lib, model=model)}")
    assert done.stdout == "" and "Traceback" not in done.stderr


def test_an_address_that_cannot_be_bound_exits_1(home: Path, tiny: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = serve(cli.environment(home), "--model", tiny, "--basert-lib", BASERT / "0.4.0", "--port", str(port))
    assert done.code == 1, done.stderr
    assert done.stderr.startswith(f"superfluid: the basert worker did not start serving (exit 1): cannot listen on "
                                  f"127.0.0.1:{port}: ")
    assert done.stderr.rstrip("\n").endswith("Address already in use: give another --port, or --port 0 for a free one")
    assert hinted_flags(done.stderr) == ["--port", "--port"]
