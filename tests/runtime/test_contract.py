"""``runtime/contract``: the worker contract — the keys every check report starts from, the line every
check parses, the reason of a model it cannot load — and a table proving every registered worker gives the
same answers to its checks (issue 33, item 3), run as processes, its engine installed (as its tests'
``ready.py`` makes it ready) or not."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from superfluid.runtime import registry
from superfluid.runtime.contract import (
    DESCRIPTOR_VERSION,
    REPORT_KEYS,
    RUNTIME_KEYS,
    capabilities,
    check_line,
    report,
    unread,
)
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.layout import worker_command
from superfluid.runtime.kernel.options import Option
from tests import cli
from tests.runtime.ready import ready

GGUF = {"id": "gguf", "describe": "a GGUF file", "file": {"extensions": ["gguf"], "magic": "GGUF"}}
OPTIONS = (Option(name="threads", kind="int", description="threads", default=1, minimum=1, maximum=8),)


def test_a_report_starts_with_every_key_of_the_contract() -> None:
    formats = [GGUF]
    got = report("llamacpp", formats=formats, tokenizer={"from": "engine"}, capabilities={"descriptor_version": 1})
    assert list(got) == list(REPORT_KEYS)
    assert got["runtime"] == {"id": "llamacpp", "version": None, "aliases": ["llama.cpp", "llama-cpp"]}
    assert (got["available"], got["devices"], got["formats"]) == (True, [], [GGUF])
    got["formats"][0]["file"]["extensions"].append("bin")  # a copy: the declaration is not changed through it
    assert GGUF["file"] == {"extensions": ["gguf"], "magic": "GGUF"}


def test_the_capability_record() -> None:
    record = capabilities(kv_bits="no such knob")
    assert record["descriptor_version"] == DESCRIPTOR_VERSION and record["load"] == {"kv_bits": "no such knob"}
    assert record["workload"]["causal_generation"] is True
    assert all(v is True or (isinstance(v, str) and v) for k, s in record.items() if k != "descriptor_version"
               for v in s.values())
    capabilities(kv_bits=True)["serving"]["park_lossy"] = "changed"
    assert capabilities(kv_bits=True)["serving"]["park_lossy"] == "superfluid parks no session"


def test_a_model_it_cannot_load_is_refused_by_its_format_first(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    assert unread([GGUF], str(tmp_path / "gone"), "no engine") == f"{tmp_path / 'gone'}: no such file or directory"
    assert unread([GGUF], str(tmp_path / "m.gguf"), "no engine") == "not read: no engine"


@pytest.mark.parametrize(("argv", "parsed", "refused"), [
    pytest.param([], (None, {}), None, id="nothing"),
    pytest.param(["--model", "/m", "--threads=2"], ("/m", {"threads": 2}), None, id="model-and-option"),
    pytest.param(["--no-such-flag", "x"], None, "unknown flag --no-such-flag", id="unknown-flag"),
    pytest.param(["--threads", "9"], None, "--threads", id="bad-value"),
    pytest.param(["--model"], None, "--model needs a value", id="no-value"),
    pytest.param(["m.gguf"], None, "unexpected argument 'm.gguf'", id="not-a-flag"),
    pytest.param(["--toy-threads", "2"], (None, {"threads": 2}), None, id="serve-spelling"),
    pytest.param(["--toy-threads", "9"], None, "--toy-threads '9'", id="serve-spelling-bad-value"),
    pytest.param(["--threads", "1", "--toy-threads", "2"], None, "--toy-threads and --threads name the same option",
                 id="both-spellings"),
    pytest.param(["--other-threads", "2"], None, "unknown flag --other-threads", id="another-runtime-spelling"),
])
def test_the_check_line(argv: list[str], parsed: tuple[str | None, dict[str, Any]] | None,
                        refused: str | None) -> None:
    if refused is None:
        assert check_line(argv, OPTIONS, "toy") == parsed
        return
    with pytest.raises(UsageError, match=refused):
        check_line(argv, OPTIONS, "toy")


# -- every worker, the same answers (a table) ------------------------------------------------------------------


def _ready_env(runtime_id: str, home: Path, request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    return cli.environment(home, **ready(runtime_id, request, tmp_path / runtime_id).variables)


def _run(runtime_id: str, argv: list[str], env: dict[str, str]) -> cli.Run:
    return cli.run(worker_command(runtime_id), *argv, env=env)


def _keys(done: cli.Run) -> tuple[int, bool, bool]:
    doc = json.loads(done.stdout)
    return done.code, set(REPORT_KEYS) <= set(doc), set(RUNTIME_KEYS) <= set(doc["runtime"])


def _missing_model(done: cli.Run) -> tuple[int, str]:
    return done.code, type(json.loads(done.stdout)["model"]["reads"]).__name__


def _unknown_flag(done: cli.Run) -> tuple[int, str, str]:
    _, _, said = done.stderr.partition(": ")
    return done.code, said, done.stdout


#: (the case, its command line, what of the answer is compared, that answer when ready, when not installed)
CASES: list[tuple[str, list[str], Callable[[cli.Run], Any], Any, Any]] = [
    ("check", ["check"], _keys, (0, True, True), (1, True, True)),
    ("check --model <missing>", ["check", "--model", "/no/such/model"], _missing_model, (1, "str"), (1, "str")),
    ("an unknown flag", ["check", "--no-such-flag", "x"], _unknown_flag, (2, "unknown flag --no-such-flag\n", ""),
     (2, "unknown flag --no-such-flag\n", "")),
]


@pytest.mark.parametrize("installed", [True, False], ids=["ready", "not-installed"])
@pytest.mark.parametrize(("case", "argv", "seen", "ready_answer", "not_installed"), CASES, ids=[c[0] for c in CASES])
def test_every_worker_gives_the_same_answers(home: Path, tmp_path: Path, request: pytest.FixtureRequest,
                                            installed: bool, case: str, argv: list[str],
                                            seen: Callable[[cli.Run], Any],
                                            ready_answer: Any, not_installed: Any) -> None:
    answers = {}
    for rid in registry.IDS:
        env = _ready_env(rid, home, request, tmp_path) if installed else cli.environment(home)
        answers[rid] = seen(_run(rid, argv, env))
    assert answers == dict.fromkeys(registry.IDS, ready_answer if installed else not_installed), case


@pytest.mark.parametrize("installed", [True, False], ids=["ready", "not-installed"])
def test_version_agrees_with_check(home: Path, tmp_path: Path, request: pytest.FixtureRequest,
                                   installed: bool) -> None:
    """``version`` prints the check's ``runtime.version``, or exits 1 with the check's reason."""
    for rid in registry.IDS:
        env = _ready_env(rid, home, request, tmp_path) if installed else cli.environment(home)
        checked = json.loads(_run(rid, ["check"], env).stdout)
        done = _run(rid, ["version"], env)
        if installed:
            assert (done.code, done.stdout) == (0, f"{checked['runtime']['version']}\n"), rid
        else:
            assert done.code == 1 and done.stderr.startswith(f"{worker_command(rid)}: {checked['available']}"), rid
            assert all(f"`{' '.join(f['argv'])}`" in done.stderr for f in checked.get("fixes", ())), rid
