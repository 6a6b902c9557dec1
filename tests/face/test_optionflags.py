"""The face's option flags: parsing, checking by declaration, serve spelling, forwarding as spelled,
finding the culprit."""

from __future__ import annotations

from pathlib import Path

import pytest

from superfluid.optionflags import (
    Culprits,
    check_runtime_options,
    culprit_message,
    find_culprits,
    parse_flag_pairs,
    split_serve_options,
    worker_argv,
)
from superfluid.runtime import registry
from superfluid.runtime.kernel.errors import UsageError
from tests import cli
from tests.declarations.conftest import fake_worker


def test_pairs_and_forwarding() -> None:
    pairs = parse_flag_pairs(["--n-gpu-layers", "0", "--tensor-split=3,1", "--flash-attn", "on"])
    values = check_runtime_options("llamacpp", pairs)
    assert values == {"n-gpu-layers": 0, "tensor-split": [3.0, 1.0], "flash-attn": "on"}
    assert worker_argv(values) == ["--n-gpu-layers", "0", "--tensor-split", "3.0,1.0", "--flash-attn", "on"]


@pytest.mark.parametrize(("tokens", "fragment"), [
    pytest.param(["stray"], "unexpected argument 'stray'", id="stray"),
    pytest.param(["--"], "unexpected argument '--'", id="bare-dashes"),
    pytest.param(["--threads"], "--threads needs a value", id="no-value"),
])
def test_bad_flag_lines(tokens: list[str], fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        parse_flag_pairs(tokens)


def test_serve_spelling_names_the_flag_as_written() -> None:
    grouped = split_serve_options([("llamacpp-n-gpu-layers", "0"), ("mlx-prefill-chunk", "64"),
                                   ("basert-kv-bits", "8")], registry.IDS)
    assert grouped == {"llamacpp": [("n-gpu-layers", "0")], "mlx": [("prefill-chunk", "64")],
                       "basert": [("kv-bits", "8")]}
    with pytest.raises(UsageError, match=r"--llamacpp-n-gpu-layers 'all': expected an integer from -1 to 2147483647"):
        check_runtime_options("llamacpp", [("n-gpu-layers", "all")], prefix="llamacpp-")
    with pytest.raises(UsageError, match=r"--basert-kv-bits '3': expected one of 0, 4, 8, 16, 84"):
        check_runtime_options("basert", [("kv-bits", "3")], prefix="basert-")
    with pytest.raises(UsageError, match="--vllm-foo: not a serve flag"):
        split_serve_options([("vllm-foo", "1")], registry.IDS)


def test_serve_spelling_forwards_with_the_runtime_prefix() -> None:
    assert worker_argv({"lib": "/l", "threads": 2}, prefix="llamacpp-") == ["--llamacpp-lib", "/l",
                                                                          "--llamacpp-threads", "2"]


#: a worker that writes its command line to $ARGV_FILE and answers a check as not available
SPY = """
with open(os.environ["ARGV_FILE"], "a") as f:
    f.write(" ".join(args) + "\\n")
print(json.dumps({"runtime": {"id": "llamacpp", "version": None, "aliases": []}, "available": "a spy",
                  "formats": [], "tokenizer": {"from": "engine"}, "devices": [], "capabilities": {}}))
sys.exit(1)
"""


@pytest.mark.parametrize(("argv", "forwarded"), [
    pytest.param(["runtime", "check", "llamacpp", "--threads", "2", "--llamacpp-lib", "/l"],
                 "check --threads 2 --llamacpp-lib /l", id="check-as-the-user-spelled-each"),
    pytest.param(["runtime", "check", "llamacpp", "--lib", "/l", "--llamacpp-threads", "2"],
                 "check --lib /l --llamacpp-threads 2", id="check-the-other-way-round"),
    # serve starts its worker at once (issue 45, item 3), and asks the check only once the worker failed
    pytest.param(["serve", "--model", "m.gguf", "--llamacpp-threads", "2", "--llamacpp-lib", "/l"],
                 "serve --model {tmp}/m.gguf --host 127.0.0.1 --port 8080 --queue 16 --llamacpp-threads 2 "
                 "--llamacpp-lib /l\ncheck --llamacpp-threads 2 --llamacpp-lib /l", id="serve-in-its-spelling"),
])
def test_every_option_reaches_the_worker_as_spelled(tmp_path: Path, argv: list[str], forwarded: str) -> None:
    """No option is special (``lib`` included): each reaches the worker as its user spelled it, which
    every worker takes (docs/adapters.md, "The worker contract"), so the worker names the flag as given."""
    (tmp_path / "m.gguf").write_bytes(b"GGUF" + bytes(60))
    spy = fake_worker(tmp_path / "spy", SPY)
    env = cli.environment(tmp_path / "home", **{registry.env_override("llamacpp"): str(spy),
                                                "ARGV_FILE": str(tmp_path / "argv")})
    done = cli.run("superfluid", *argv, env=env, cwd=tmp_path)
    assert done.code in (1, 4) and "a spy" in done.stderr, done.stderr
    lines = forwarded.format(tmp=tmp_path).splitlines()
    assert (tmp_path / "argv").read_text().splitlines()[:len(lines)] == lines


def _probe(bad: set[str], pairs_bad: set[frozenset[str]] = frozenset(), *, base_ok: bool = True):  # type: ignore[no-untyped-def]
    calls: list[list[str]] = []

    def probe(argv: list[str]) -> tuple[bool, str]:
        calls.append(argv)
        names = {a[2:] for a in argv if a.startswith("--")}
        if not base_ok or names & bad or any(p <= names for p in pairs_bad):
            return False, "load failed"
        return True, ""

    return probe, calls


@pytest.mark.parametrize(("bad", "pairs_bad", "base_ok", "expected"), [
    pytest.param({"b"}, set(), True, Culprits(["b"], False), id="one-alone"),
    pytest.param({"a", "c"}, set(), True, Culprits(["a", "c"], False), id="two-alone"),
    pytest.param(set(), {frozenset({"a", "b"})}, True, Culprits(["a", "b", "c"], True), id="only-together"),
    pytest.param(set(), set(), True, None, id="passes-with-them"),
    pytest.param({"a"}, set(), False, None, id="fails-without-them-too"),
])
def test_find_culprits(bad: set[str], pairs_bad: set[frozenset[str]], base_ok: bool,
                       expected: Culprits | None) -> None:
    probe, _ = _probe(bad, pairs_bad, base_ok=base_ok)
    assert find_culprits(probe, {"a": 1, "b": 2, "c": 3}) == expected


def test_no_options_no_probe() -> None:
    probe, calls = _probe({"a"})
    assert find_culprits(probe, {}) is None and calls == []


def test_culprit_messages() -> None:
    values = {"cache-type-k": "q4_0", "threads": 2}
    assert culprit_message("llamacpp", Culprits(["cache-type-k"], False), values, "boom", prefix="llamacpp-") == \
        "the llamacpp runtime fails with --llamacpp-cache-type-k q4_0 and passes without it: boom"
    assert culprit_message("llamacpp", Culprits(["cache-type-k", "threads"], False), values, "boom") == \
        "the llamacpp runtime fails with each of --cache-type-k q4_0, --threads 2 and passes without them: boom"
