"""The answers a host written against upstream superfluid reads (issue 33, items 1 and 2): ``runtimes <model>
[--json]`` (each runtime's verdict, the runtime that serves it; exit 0, 1 or 2), the upstream keys of every
``runtimes --json`` row beside ours (the schema says which are which), and READS in the table."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from superfluid.runtime import registry
from superfluid.runtime.kernel.schema import errors, load
from tests import cli
from tests.cli import Run
from tests.conftest import Home

#: upstream's keys of a runtimes --json row (its runtimes_report.rs), and ours
UPSTREAM = {"id", "state", "ready", "aliases", "formats", "reads", "tokenizer_source", "worker", "install", "version",
            "devices", "tokenizer", "capabilities"}
OURS = {"installable", "options", "requires", "abi", "lock", "verified", "for", "fix", "fixes", "advice",
        "provenance"}


def _valid(doc: Any, name: str) -> None:
    found = errors(doc, name)
    assert not found, found


@pytest.fixture
def tiny_gguf(tmp_path: Path, gguf_models: dict[str, Path]) -> Path:
    path = tmp_path / "models" / "tiny.gguf"
    path.parent.mkdir()
    shutil.copyfile(gguf_models["tiny-f16.gguf"], path)
    return path


@pytest.fixture
def llama_home(home: Path, libllama_v2: Path) -> Home:
    """A home where llama.cpp is ready (a real libllama named by SUPERFLUID_LLAMA_LIB)."""
    return Home(home, cli.environment(home, SUPERFLUID_LLAMA_LIB=str(libllama_v2)))


def _model(home: Home, *argv: str) -> tuple[Run, dict[str, Any]]:
    done = home.superfluid("runtimes", *argv, "--json")
    doc = json.loads(done.stdout)
    _valid(doc, "runtimes-model")
    _valid([{k: v for k, v in r.items() if k not in ("reads_model", "model_facts")} for r in doc["runtimes"]],
           "runtimes")
    return done, doc


def test_a_gguf_is_served_by_llamacpp_where_llama_cpp_is_ready(llama_home: Home, tiny_gguf: Path) -> None:
    done, doc = _model(llama_home, str(tiny_gguf))
    assert done.code == 0, done.stderr
    assert doc["model"] == str(tiny_gguf) and doc["serves"] == "llamacpp"
    assert doc["format"] == {"id": "gguf", "describe": "a GGUF file", "file": {"extensions": ["gguf"], "magic": "GGUF"}}
    rows = {r["id"]: r for r in doc["runtimes"]}
    assert list(rows) == list(registry.IDS)
    assert rows["llamacpp"]["reads_model"] is True and rows["llamacpp"]["ready"] is True
    assert rows["llamacpp"]["model_facts"]["architecture"] == "llama"
    assert rows["basert"]["reads_model"] == f"it reads a baseRT model file, and {tiny_gguf} is not one"
    assert rows["mlx"]["reads_model"] == f"it reads an MLX model directory, and {tiny_gguf} is not one"
    assert "model_facts" not in rows["basert"]


def test_the_text_names_each_verdict_then_who_serves_it(llama_home: Home, tiny_gguf: Path) -> None:
    done = llama_home.superfluid("runtimes", str(tiny_gguf))
    assert done.code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"{tiny_gguf}: a GGUF file" and lines[1] == ""
    assert lines[2].split() == ["RUNTIME", "READS", "IT", "DEVICE", "MODEL"]
    assert lines[2].startswith("RUNTIME   READS IT  DEVICE")
    llama = next(line for line in lines if line.startswith("llamacpp "))
    assert llama.split()[1] == "yes" and llama.endswith("  llama")
    assert "no        -" in next(line for line in lines if line.startswith("basert "))
    assert "llamacpp serves it: the runtime that reads its format (--runtime picks another that reads it)" in lines
    assert "  images          no: superfluid serves text prompts only" in lines
    assert lines[-1].startswith("  KV bits         no: no such knob")


def test_no_runtime_serves_it_where_llama_cpp_is_not_ready(cli_home: Home, tiny_gguf: Path) -> None:
    done, doc = _model(cli_home, str(tiny_gguf))
    assert done.code == 1
    assert doc["serves"]["none"].startswith("llamacpp reads its format, and is not ready: llama.cpp not found")
    llama = next(r for r in doc["runtimes"] if r["id"] == "llamacpp")
    assert llama["reads_model"] == "not read: the llamacpp runtime is not ready (see ready)"
    text = cli_home.superfluid("runtimes", str(tiny_gguf))
    assert text.code == 1 and text.stdout.splitlines()[-1].startswith(
        "no runtime here serves it: llamacpp reads its format, and is not ready: ")


def test_a_model_no_runtime_declares(cli_home: Home, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a model\n")
    done, doc = _model(cli_home, str(notes))
    assert done.code == 1 and doc["format"] is None
    assert doc["serves"]["none"].startswith(f"no runtime here reads {notes}: basert reads a baseRT model file")
    assert cli_home.superfluid("runtimes", str(notes)).stdout.startswith(
        f"{notes}: no runtime here declares this format\n")


def test_a_model_basert_reads(home: Path, engines: Path) -> None:
    ready = Home(home, cli.environment(home, BASERT_LIB=str(engines / "0.4.0")))
    model = engines / "models" / "tiny.base"
    done, doc = _model(ready, str(model))
    assert done.code == 0 and doc["serves"] == "basert", done.stderr
    assert ready.superfluid("runtimes", str(model)).stdout.splitlines()[-1] == "  KV bits         yes"


def test_a_model_changed_in_place_is_judged_again(llama_home: Home, tiny_gguf: Path) -> None:
    """A check's answer is kept, but not past a change to the model it judged."""
    assert _model(llama_home, str(tiny_gguf))[0].code == 0
    tiny_gguf.write_bytes(b"GGUF" + bytes(60))
    done, doc = _model(llama_home, str(tiny_gguf))
    assert done.code == 1 and doc["serves"]["none"].startswith("llamacpp reads its format, and not this model")


@pytest.mark.parametrize(("argv", "said"), [
    pytest.param(["a.gguf", "b.gguf"], "unrecognized arguments: b.gguf", id="two-models"),
    pytest.param(["{missing}"], "model {missing}: no such file or directory", id="missing"),
    pytest.param(["{fifo}"], "is a FIFO", id="fifo"),
    pytest.param(["--verify", "{model}"], "--verify checks the installs, not a model", id="verify-and-a-model"),
])
def test_a_bad_line_is_2(cli_home: Home, tmp_path: Path, argv: list[str], said: str) -> None:
    fifo, model = tmp_path / "m.fifo", tmp_path / "m.gguf"
    os.mkfifo(fifo)
    model.write_bytes(b"GGUF")
    paths = {"missing": str(tmp_path / "gone.gguf"), "fifo": str(fifo), "model": str(model)}
    done = cli_home.superfluid("runtimes", *[a.format(**paths) for a in argv])
    assert done.code == 2 and said.format(**paths) in done.stderr, done.stderr
    assert done.stdout == ""


# -- the rows a host reads ----------------------------------------------------------------------------------------

def test_every_row_carries_upstreams_keys(cli_home: Home) -> None:
    done = cli_home.superfluid("runtimes", "--json")
    assert done.code == 0
    rows = json.loads(done.stdout)
    _valid(rows, "runtimes")
    for row in rows:
        facts = registry.get(row["id"]).model_facts()
        assert row["aliases"] == registry.aliases_of(row["id"]) and row["formats"] == facts.formats
        assert row["capabilities"] == facts.capabilities and row["capabilities"]["descriptor_version"] == 1
        assert row["tokenizer_source"] == facts.tokenizer
    by_id = {r["id"]: r for r in rows}
    assert by_id["llamacpp"]["aliases"] == ["llama.cpp", "llama-cpp"] and by_id["llamacpp"]["reads"] == "a GGUF file"
    assert by_id["mlx"]["tokenizer_source"] == {"from": "huggingface"}
    assert by_id["basert"]["capabilities"]["load"] == {"kv_bits": True}


def test_the_schema_says_which_keys_are_upstreams_and_which_are_ours() -> None:
    properties = load("runtimes")["items"]["properties"]
    origin = {key: spec.get("x-origin") for key, spec in properties.items()}
    assert {k for k, o in origin.items() if o == "upstream"} == UPSTREAM
    assert {k for k, o in origin.items() if o == "ours"} == OURS


def test_the_table_has_reads(cli_home: Home) -> None:
    done = cli_home.superfluid("runtimes")
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["RUNTIME", "STATE", "INSTALL", "VERSION", "ABI", "INSTALLABLE", "READS", "DEVICE",
                                "WORKER"]
    cells = {line.split()[0]: line for line in lines[1:4]}
    at = lines[0].index("READS")
    assert {rid: line[at:].split()[0] for rid, line in cells.items()} == {"basert": "base", "llamacpp": "gguf",
                                                                           "mlx": "mlx"}
