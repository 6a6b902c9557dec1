"""``runtime/conformance``: the kit every adapter runs on itself (issue 33, item 4) — every registered
adapter passes it through its real worker executable, its engine installed or not, and serving a model
where it serves (the test-only engine of tests/declarations/test_fourth_engine.py too), and it fails,
naming the fault, on a report that drops a key, a declaration ``--runtime`` cannot take, a format that
matches nothing or a text file, a ``version`` that disagrees with ``check``, a worker that takes a flag
it does not read, or one that does not take an option as serve spells it (issue 43, point 8)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import pytest

from superfluid.runtime import conformance, registry
from superfluid.runtime.adapter import Adapter, ModelFacts
from superfluid.runtime.conformance import (
    declaration_faults,
    faults,
    format_faults,
    main,
    report_faults,
    sample,
)
from superfluid.runtime.contract import REPORT_KEYS, RUNTIME_KEYS
from superfluid.runtime.hostfacts.host import Host
from superfluid.runtime.kernel.formats import facts_of, match
from superfluid.runtime.kernel.layout import worker_command
from superfluid.runtime.kernel.lookup import read
from superfluid.runtime.kernel.options import Option
from tests import cli
from tests.declarations.conftest import fake_worker
from tests.runtime.ready import ready


def _worker(runtime_id: str) -> list[str]:
    return [cli.script(worker_command(runtime_id))]


@pytest.mark.parametrize("runtime_id", registry.IDS)
def test_every_adapter_conforms_with_nothing_installed(home: Path, runtime_id: str) -> None:
    assert faults(registry.get(runtime_id), worker=_worker(runtime_id), env=cli.environment(home)) == []


@pytest.mark.parametrize("runtime_id", registry.IDS)
def test_every_adapter_conforms_when_ready(home: Path, tmp_path: Path, request: pytest.FixtureRequest,
                                           runtime_id: str) -> None:
    """Ready as its tests' ``ready.py`` makes it, and serving the model it gives (where it serves here)."""
    variables, model = ready(runtime_id, request, tmp_path)
    env = cli.environment(home, **variables)
    adapter = registry.get(runtime_id)
    assert faults(adapter, worker=_worker(runtime_id), env=env, model=str(model) if model else None) == []
    if adapter.linked:
        assert adapter.check([], read(env))[0]["available"] is True


# -- it fails when a report drops a key ------------------------------------------------------------------------

#: a worker that answers as the real one, less one key of its check report
DROPPING = """
import subprocess
done = subprocess.run([{real!r}, *args], capture_output=True, text=True)
out = done.stdout
if args[:1] == ["check"] and out.strip():
    report = json.loads(out)
    path = {path!r}
    if len(path) == 1:
        report.pop(path[0])
    else:
        report[path[0]].pop(path[1])
    out = json.dumps(report) + "\\n"
sys.stdout.write(out)
sys.stderr.write(done.stderr)
sys.exit(done.returncode)
"""


@pytest.mark.parametrize("path", [*((k,) for k in REPORT_KEYS), *(("runtime", k) for k in RUNTIME_KEYS)],
                         ids=lambda p: ".".join(p))
def test_the_kit_fails_when_a_report_drops_a_key(home: Path, tmp_path: Path, path: tuple[str, ...]) -> None:
    worker = fake_worker(tmp_path / "dropping", DROPPING.format(real=_worker("llamacpp")[0], path=list(path)))
    found = faults(registry.get("llamacpp"), worker=[str(worker)], env=cli.environment(home))
    assert f"llamacpp: its check report has no `{'.'.join(path)}`" in found, found


def test_the_command_line_fails_on_a_dropped_key_and_says_which(home: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    worker = fake_worker(tmp_path / "dropping", DROPPING.format(real=_worker("mlx")[0], path=["tokenizer"]))
    for key, value in cli.environment(home).items():
        monkeypatch.setenv(key, value)
    assert main(["mlx", "--worker", str(worker)]) == 1
    assert "mlx: its check report has no `tokenizer`\n" in capsys.readouterr().out
    assert main(["mlx", "--worker", _worker("mlx")[0]]) == 0
    assert capsys.readouterr().out == ("mlx conforms: its declarations, formats, check report and worker command "
                                       "line keep the worker contract\n")


def test_the_command_line_serves_a_model_with_options(home: Path, engines: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Options in either spelling, forwarded to serve as ``superfluid serve`` forwards them."""
    for key, value in cli.environment(home).items():
        monkeypatch.setenv(key, value)
    model = engines / "models" / "tiny.base"
    assert main(["basert", "--worker", _worker("basert")[0], "--model", str(model), "--lib", str(engines / "0.4.0"),
                 "--basert-kv-bits", "8"]) == 0
    assert capsys.readouterr().out == ("basert conforms: its declarations, formats, check report and worker command "
                                       "line keep the worker contract, and it serves tiny.base as a host asks\n")


@pytest.mark.parametrize(("argv", "said"), [
    pytest.param([], "usage: python -m superfluid.runtime.conformance <id> [--worker PATH]", id="nothing"),
    pytest.param(["mlx", "--worker"], "--worker needs the path", id="no-worker-path"),
    pytest.param(["toy"], "no runtime 'toy'", id="unknown-id"),
    pytest.param(["llamacpp", "--threads", "2"], "options are given to serve: name its model with --model PATH",
                 id="options-without-a-model"),
    pytest.param(["llamacpp", "--model", "m.gguf", "--threads", "0"], "--threads '0': expected an integer",
                 id="a-bad-option-value"),
    pytest.param(["llamacpp", "--model", "m.gguf", "--basert-lib", "/l"], "--basert-lib: no such option",
                 id="another-runtimes-option"),
    pytest.param(["llamacpp", "stray"], "unexpected argument 'stray'", id="stray"),
])
def test_a_bad_line_is_2(capsys: pytest.CaptureFixture[str], argv: list[str], said: str) -> None:
    assert main(argv) == 2
    assert said in capsys.readouterr().err


# -- the worker command line ----------------------------------------------------------------------------------

#: a worker answering check as llamacpp's does when nothing is installed, and one fault on request
HONEST = """
fault = os.environ.get("FAULT", "")
report = {"runtime": {"id": "llamacpp", "version": None, "aliases": ["llama.cpp", "llama-cpp"]},
          "available": "nothing here", "formats": %s, "tokenizer": {"from": "engine"}, "devices": [],
          "capabilities": %s}
if args[:1] == ["version"]:
    if fault == "version":
        print("llama.cpp b1")
        sys.exit(0)
    sys.stderr.write("w: nothing here\\n")
    sys.exit(1)
if args[:1] == ["check"]:
    rest = args[1:]
    if rest and rest[0] not in ("--model",):
        if fault == "flag":
            sys.exit(1)
        sys.stderr.write("w: unknown flag " + rest[0] + "\\n")
        sys.exit(2)
    if rest:
        report["model"] = {"path": rest[1], "reads": True if fault == "reads" else "not read"}
    if fault == "exit":
        print(json.dumps(report))
        sys.exit(0)
    print(json.dumps(report))
    sys.exit(1)
sys.exit(2)
"""


@pytest.fixture
def honest(tmp_path: Path) -> Path:
    adapter = registry.get("llamacpp")
    facts = adapter.model_facts()
    return fake_worker(tmp_path / "honest", HONEST % (repr(facts.formats), repr(facts.capabilities)))


@pytest.mark.parametrize(("fault", "said"), [
    pytest.param("", None, id="none"),
    pytest.param("version", "llamacpp: version exits 0 on a runtime check calls unusable (1, and why)", id="version"),
    pytest.param("flag", "llamacpp: check --no-such-flag x exits 1", id="takes-an-unknown-flag"),
    pytest.param("reads", "llamacpp: check --model <missing> reads it", id="reads-a-missing-model"),
    pytest.param("exit", "llamacpp: its check exits 0 and says available: 'nothing here'", id="exit-disagrees"),
])
def test_the_worker_faults(home: Path, tmp_path: Path, honest: Path, fault: str, said: str | None) -> None:
    found = conformance.worker_faults(registry.get("llamacpp"), [str(honest)], cli.environment(home, FAULT=fault),
                                      str(tmp_path))
    if said is None:
        assert found == []
    else:
        assert any(f.startswith(said) for f in found), found


# -- every option in both spellings ------------------------------------------------------------------------------

#: a worker that writes each command line to $ARGV_FILE and answers a check; with $PLAIN_ONLY, it
#: refuses serve's spelling of an option as a flag it does not know
SPELLING = """
with open(os.environ["ARGV_FILE"], "a") as f:
    f.write(" ".join(args) + "\\n")
spelled = [a for a in args if a.startswith("--llamacpp-")]
if spelled and os.environ.get("PLAIN_ONLY"):
    sys.stderr.write("w: unknown flag " + spelled[0] + "\\n")
    sys.exit(2)
print(json.dumps({"available": "nothing here"}))
sys.exit(1)
"""
TAKES = [Option(name="threads", kind="int", description="t", minimum=1, maximum=8),
         Option(name="lib", kind="path", description="l"), Option(name="fa", kind="bool", description="f"),
         Option(name="kv", kind="enum", description="k", values=("f16", "q8")),
         Option(name="split", kind="list", description="s", item="float"),
         Option(name="mode", kind="enum", description="m", values=("a", "b"), default="b")]


@pytest.mark.parametrize("plain_only", [False, True], ids=["both-spellings", "plain-only"])
def test_a_worker_takes_every_option_in_both_spellings(home: Path, tmp_path: Path, plain_only: bool) -> None:
    """The face forwards an option as its user spelled it, serve as ``--<id>-<option>``: a worker that
    takes only ``--<option>`` fails ``check --<id>-lib`` and ``serve`` (issue 43, point 8)."""
    worker = fake_worker(tmp_path / "spelling", SPELLING)
    env = cli.environment(home, ARGV_FILE=str(tmp_path / "argv"), **({"PLAIN_ONLY": "1"} if plain_only else {}))
    found = conformance.spelling_faults(made(options=TAKES), [str(worker)], env, str(tmp_path))
    sample = f"--threads 1 --lib {tmp_path / 'no-such-lib'} --fa false --kv f16 --split 1 --mode b"
    assert (tmp_path / "argv").read_text().splitlines() == [
        f"check {sample}", f"check {sample.replace('--', '--llamacpp-')}"]
    if plain_only:
        assert len(found) == 1 and found[0].startswith(f"llamacpp: check {sample.replace('--', '--llamacpp-')} "
                                                       "exits 2 ('w: unknown flag --llamacpp-threads')")
        assert found[0].endswith("as serve spells it, --llamacpp-<option> V")
    else:
        assert found == []


# -- declarations, formats and reports, in process --------------------------------------------------------------

class Made(Adapter):
    """An adapter whose declarations a test writes."""

    id = "llamacpp"
    package = "nowhere"
    said: dict[str, Any] = {}

    def compat(self) -> dict[str, Any]:
        return {}

    def versions(self, host: Host, installed: Collection[str],
                 compat_part: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        return []

    def options(self) -> list[Option]:
        return list(self.said.get("options", []))

    def model_facts(self) -> ModelFacts:
        return ModelFacts(formats=list(self.said.get("formats", [])),
                          tokenizer=dict(self.said.get("tokenizer", {"from": "engine"})),
                          capabilities=dict(self.said.get("capabilities", {})))


def made(**said: Any) -> Adapter:
    cls = type("Declared", (Made,), {"said": said, **({"id": said["id"]} if "id" in said else {})})
    return cls()


@pytest.fixture
def aliases(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[str]], None]:
    """Declare the names the registry gives every runtime (``registry.aliases_of``) for one test."""
    def declare(names: list[str]) -> None:
        monkeypatch.setattr(registry, "aliases_of", lambda runtime_id: list(names))
    return declare


GGUF = {"id": "gguf", "describe": "a GGUF file", "file": {"extensions": ["gguf"], "magic": "GGUF"}}
MLX = {"id": "mlx", "describe": "an MLX model directory",
       "directory": {"files": ["config.json"], "extensions": ["safetensors"]}}


@pytest.mark.parametrize(("said", "fault"), [
    pytest.param({"id": "Llama CPP"}, "the id 'Llama CPP' is not spelled as a runtime id can be", id="bad-id"),
    pytest.param({"id": "llama2"}, "'llama2' is not in the registry", id="not-registered"),
    pytest.param({"aliases": ["llamacpp"]}, "the alias 'llamacpp' repeats the id", id="alias-is-the-id"),
    pytest.param({"aliases": ["mlx"]}, "the alias 'mlx' is another runtime's id", id="alias-is-another-id"),
    pytest.param({"aliases": ["l", "l"]}, "the alias 'l' is declared twice", id="alias-twice"),
    pytest.param({"aliases": ["llama cpp"]}, "the alias 'llama cpp' cannot be written in --runtime", id="space"),
    pytest.param({"aliases": ["l@1"]}, "the alias 'l@1' cannot be written in --runtime", id="at"),
    pytest.param({"aliases": [""]}, "the alias '' cannot be written in --runtime", id="empty"),
    pytest.param({"options": [Option(name="Threads", kind="int", description="t")]},
                 "the option 'Threads' cannot be written", id="option"),
    pytest.param({"options": [Option(name="model", kind="path", description="m")]},
                 "the option 'model' cannot be written", id="model"),
    pytest.param({"options": [Option(name="t", kind="int", description="t"), Option(name="t", kind="int",
                                                                                    description="t")]},
                                                                                    "the option 't' is declared twice",
                 id="option-twice"),
    pytest.param({"formats": [GGUF, GGUF]}, "the format gguf is declared twice", id="format-twice"),
    pytest.param({"formats": [{"id": "x", "describe": ""}]}, "a format needs an id and words for it", id="no-words"),
    pytest.param({"formats": [{"id": "x", "describe": "x", "file": {}}]},
                 "the file format x names neither an extension nor a magic", id="file-matches-nothing"),
    pytest.param({"formats": [{"id": "x", "describe": "x", "directory": {"files": ["a"]}}]},
                 "the directory format x names no weights extension", id="directory-matches-nothing"),
    pytest.param({"formats": [{"id": "x", "describe": "x"}]}, "the format x is neither a file nor a directory",
                 id="neither"),
    pytest.param({"tokenizer": {"from": "magic"}}, "the tokenizer comes from 'magic'", id="tokenizer"),
    pytest.param({"tokenizer": {"from": "library"}}, "a library tokenizer names no library", id="library"),
    pytest.param({"capabilities": {"load": {}}}, "descriptor_version is None, not 1", id="no-descriptor-version"),
    pytest.param({"capabilities": {"descriptor_version": 1, "load": {"kv_bits": False}}},
                 "the capability load.kv_bits is False: true, or why not", id="capability-false"),
])
def test_a_declaration_fault_is_named(said: dict[str, Any], fault: str,
                                      aliases: Callable[[list[str]], None]) -> None:
    aliases(said.get("aliases", []))
    found = declaration_faults(made(**said))
    assert any(fault in f for f in found), found


def test_the_shipped_declarations_have_no_fault() -> None:
    for rid in registry.IDS:
        assert declaration_faults(registry.get(rid)) == []


@pytest.mark.parametrize("fmt", [GGUF, MLX, {"id": "bare", "describe": "a bare file", "file": {"magic": "BARE"}}],
                         ids=["file", "directory", "magic-only"])
def test_a_sample_is_made_to_its_formats_rule(tmp_path: Path, fmt: dict[str, Any]) -> None:
    assert match(fmt, facts_of(sample(str(tmp_path), fmt))) is not None


def test_a_format_that_claims_a_text_file_or_reads_that_takes_anything(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    text = {"id": "text", "describe": "a text file", "file": {"extensions": ["txt"]}}
    found = format_faults(made(formats=[text]), str(tmp_path))
    assert f"llamacpp: a text file matches a format ({tmp_path / 'notes.txt'})" in found
    monkeypatch.setattr(conformance, "reads", lambda formats, path: None)  # a gate that takes anything
    found = format_faults(made(formats=[GGUF]), str(tmp_path))
    assert "llamacpp: reads accepts a path that does not exist" in found
    assert f"llamacpp: reads accepts a text file ({tmp_path / 'notes.txt'})" in found


def test_a_report_that_does_not_read_back_to_the_declaration() -> None:
    adapter = registry.get("llamacpp")
    facts = adapter.model_facts()
    good, code = {"runtime": {"id": "llamacpp", "version": None, "aliases": registry.aliases_of("llamacpp")},
                  "available": "no", "formats": facts.formats, "tokenizer": facts.tokenizer, "devices": [],
                  "capabilities": facts.capabilities}, 1
    assert report_faults(adapter, good, code) == []
    cases = [
        ({"runtime": {**good["runtime"], "id": "mlx"}}, "names another runtime: 'mlx'"),
        ({"runtime": {**good["runtime"], "aliases": []}}, "aliases [] are not the declared"),
        ({"formats": []}, "`formats` does not read back to the declaration"),
        ({"tokenizer": {"from": "huggingface"}}, "`tokenizer` does not read back"),
        ({"devices": [{"backend": "CPU"}]}, "while the runtime is not available"),
        ({"available": ""}, "available is '': true, or why not"),
        ({"runtime": {**good["runtime"], "version": "b1"}}, "runtime.version is 'b1'"),
    ]
    for change, said in cases:
        found = report_faults(adapter, {**good, **change}, code)
        assert any(said in f for f in found), (change, found)
    ready = {**good, "available": True, "runtime": {**good["runtime"], "version": "llama.cpp b1"},
             "devices": [{"backend": "CPU", "name": "cpu", "memory": 1}]}
    assert report_faults(adapter, ready, 0) == []
    assert any("lacks one of backend, name, memory" in f
               for f in report_faults(adapter, {**ready, "devices": [{"backend": "CPU"}]}, 0))
    assert report_faults(adapter, [1], 1) == ["llamacpp: its check printed list, not a report (a JSON object)"]


def test_the_default_worker_is_the_packages_worker_module() -> None:
    assert conformance.default_worker(registry.get("mlx")) == [sys.executable, "-m", "superfluid.runtime.mlx.worker"]
