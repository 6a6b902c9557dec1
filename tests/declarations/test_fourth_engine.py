"""A new engine is its folder, one registry line and one entry point (issue 20, item 1; issue 43, point
8): a test-only engine, added to a copy of the package in its import layout with nothing else changed, and
its worker's console script made as the set-up makes one from pyproject.toml, is seen by ``superfluid
runtimes``, ``compat``, ``runtime versions``/``options``, ``serve --help``, ``compat --service`` and the
compat manifest's choose answers and page (docs/adapters.md, "Adding an engine", is the recipe); its worker
passes the conformance kit, check and serve included, and ``superfluid runtime check <id> --<id>-lib`` and
``superfluid serve`` run it as they run the engines that ship."""

from __future__ import annotations

import difflib
import filecmp
import json
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from superfluid.runtime import registry
from tests import cli
from tests.cli import VENV_BIN
from tests.conftest import ROOT
from tests.serving_client import SuperfluidServe

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the 3.10 interpreters have tomli (a dependency)
    import tomli as tomllib

ID = "toy"
#: the registry line the new engine adds
LINE = f'    "{ID}": "superfluid.runtime.{ID}.adapter",\n'
#: its worker's entry point, the line it adds to pyproject.toml's [project.scripts]
ENTRY = f'superfluid-worker-{ID} = "superfluid.runtime.{ID}.worker:main"\n'
#: the new engine's folder: its declarations, how it is shown, its check, its serve and its worker; a
#: "library" it loads (a file stating its version) and an engine that plays the prompt back, in Python
FOLDER = {
    "__init__.py": '"""A test-only engine."""\n',
    "recipe.json": json.dumps({"tags": ["t7", "t3"], "platforms": ["linux-x64"]}, indent=2) + "\n",
    "adapter.py": """\"\"\"The toy engine's declarations, from its recipe alone.\"\"\"

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from superfluid.runtime.adapter import Adapter
from superfluid.runtime.kernel.options import Option, options_json

#: the one format it reads (its tokenizer is the engine's, and it states no capabilities: the defaults)
FORMATS = ({"id": "toy", "describe": "a toy model file", "file": {"extensions": ["toy"], "magic": "TOY1"}},)
#: what it takes: --toy-speed and --toy-lib on serve (its worker takes --speed and --lib too)
OPTIONS = (Option(name="speed", kind="int", description="how fast the toy plays", default=1, minimum=1, maximum=9),
           Option(name="lib", kind="path", description="the toy library to load"))


class ToyAdapter(Adapter):
    \"\"\"An engine with a recipe and a library of its own, and no installer.\"\"\"

    id = "toy"
    package = "superfluid.runtime.toy"
    options_from = "superfluid.runtime.toy.adapter"
    formats_from = "superfluid.runtime.toy.adapter"
    presentation_from = "superfluid.runtime.toy.presentation"

    def compat(self) -> dict[str, Any]:
        return {"tags": list(self.recipe["tags"]), "platforms": list(self.recipe["platforms"]),
                "options": options_json(self.options())}

    def versions(self, host: Any, installed: Collection[str],
                 compat_part: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        return [{"version": t, "installs": "the toy engine installs nowhere", "install": None,
                 "installed": False, "tested": True} for t in self.recipe["tags"]]


ADAPTER = ToyAdapter()
""",
    "presentation.py": """\"\"\"How the toy engine is shown: asked by tag.\"\"\"

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from superfluid.runtime.presentation import Presentation, Question, ServeFlag, Shown


class ToyPresentation(Presentation):
    \"\"\"An engine asked by a kind of question no other engine has (``tag``).\"\"\"

    questions = (Question(kind="tag", pattern=r"t[1-9][0-9]*", expected="a toy tag, e.g. t7", metavar="T",
                          flag="a toy tag, e.g. t7"),)
    serve_flags = (ServeFlag("speed", "N", "how fast the toy plays"),)
    column = "toy tags"

    def judge(self, part: Mapping[str, Any], kind: str, value: str, platform: str | None,
              release: str) -> dict[str, Any]:
        if value in part["tags"]:
            return {"by": "tested", "short": "tested", "why": f"{value} is a tag {release} was tested with"}
        return {"by": None, "short": "not tested", "why": f"{value} is not a tag {release} was tested with"}

    def named(self, part: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        return (("tag", t) for t in part["tags"])

    def drives_cell(self, part: Mapping[str, Any]) -> str:
        return ", ".join(part["tags"])

    def shown(self, part: Mapping[str, Any]) -> Shown:
        return Shown(f"{self.id}: tested with these toy tags", ("TAG",), tuple((t,) for t in part["tags"]))


PRESENTATION = ToyPresentation("toy")
""",
    "check.py": """\"\"\"The toy engine's check: the library --lib names, and whether it reads a model.\"\"\"

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from superfluid.runtime import contract
from superfluid.runtime.kernel.formats import reads
from superfluid.runtime.kernel.lookup import Lookup
from superfluid.runtime.toy.adapter import ADAPTER

NOTHING = "the toy engine has nothing to load"


def library(path: str | None) -> tuple[str | None, str]:
    \"\"\"The version the toy library at ``path`` states (its first line, ``TOYLIB <version>``), or None
    and why not.\"\"\"
    if path is None:
        return None, NOTHING
    try:
        with open(path, "rb") as f:
            head = f.read(64).split(b"\\n")[0]
    except OSError as e:
        return None, f"{path}: {e.strerror}"
    if not head.startswith(b"TOYLIB "):
        return None, f"{path} is not a toy library"
    return head[len(b"TOYLIB "):].decode("ascii", "replace"), ""


def check_argv(argv: Sequence[str], lookup: Lookup) -> tuple[dict[str, Any], int]:
    model, options = contract.check_line(argv, ADAPTER.options(), ADAPTER.id)
    facts = ADAPTER.model_facts()
    report = contract.report(ADAPTER.id, formats=facts.formats, tokenizer=facts.tokenizer,
                             capabilities=facts.capabilities)
    version, why = library(options.get("lib"))
    if version is None:
        report["available"] = why
    else:
        report["runtime"]["version"] = version
        report["library"] = os.path.abspath(options["lib"])
    if model is not None:
        read = (reads(facts.formats, model) or True) if version else contract.unread(facts.formats, model, why)
        report["model"] = {"path": model, "reads": read}
    return report, 0 if version and (model is None or report["model"]["reads"] is True) else 1
""",
    "serve.py": """\"\"\"The toy engine's serve: it plays the prompt back, byte by byte, behind the shared server.\"\"\"

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from superfluid.runtime.kernel.errors import ModelLoadFailed, SuperfluidError, UsageError
from superfluid.runtime.kernel.formats import reads
from superfluid.runtime.kernel.lookup import Lookup
from superfluid.runtime.kernel.options import declared_name, parse_flag_pairs, read_options
from superfluid.runtime.serving.completions import Sampling
from superfluid.runtime.serving.flags import listen_flags, max_context_flag, queue_flag
from superfluid.runtime.serving.http import serve_engine
from superfluid.runtime.toy.adapter import ADAPTER, FORMATS
from superfluid.runtime.toy.check import library

#: its tokens: a byte each, then the beginning and the end of a text
BOS, EOS = 256, 257
_OWN = ("--model", "--host", "--port", "--max-context", "--queue")


class Echo:
    \"\"\"A generation that plays the prompt back, then ends.\"\"\"

    def __init__(self, prompt: list[int], n_ctx: int) -> None:
        self.left = [t for t in prompt if t < BOS]
        self.held = len(prompt)
        self.n_ctx = n_ctx

    def next_token(self) -> int:
        return self.left[0] if self.left else EOS

    def feed(self, token: int) -> None:
        self.left.pop(0)
        self.held += 1

    def full(self) -> bool:
        return self.held >= self.n_ctx


class ToyEngine:
    \"\"\"A loaded toy model, as the HTTP layer asks it (``serving.generation.ServedEngine``).\"\"\"

    runtime_id = "toy"

    def __init__(self, model_path: str, version: str, lib: str, n_ctx: int) -> None:
        self.model_path, self.version, self.lib, self.n_ctx = model_path, version, lib, n_ctx
        self.model_id = os.path.basename(model_path).removesuffix(".toy")

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        return [BOS, *text.encode()]

    def chat_prompt(self, messages: Sequence[tuple[str, str]]) -> str:
        return "".join(f"{role}: {content}\\n" for role, content in messages) + "assistant: "

    @contextmanager
    def generation(self, prompt: list[int], sampling: Sampling | None) -> Iterator[Echo]:
        yield Echo(prompt, self.n_ctx)

    def is_eos(self, token: int) -> bool:
        return token == EOS

    def piece(self, token: int) -> bytes:
        return bytes([token])

    def facts(self) -> dict[str, Any]:
        return {"runtime": self.version, "library": self.lib}

    def close(self) -> None:
        pass


def serve(argv: Sequence[str], lookup: Lookup, out: TextIO) -> int:
    own: dict[str, str] = {}
    given: list[tuple[str, str]] = []
    declared = ADAPTER.options()
    for name, value in parse_flag_pairs(argv, lambda n: f"--{n}" in _OWN or declared_name(n, declared, ADAPTER.id)
                                        is not None):
        if f"--{name}" in _OWN:
            own[f"--{name}"] = value
        else:
            given.append((name, value))
    options = read_options(given, declared, ADAPTER.id)
    if "--model" not in own:
        raise UsageError("serve needs --model PATH")
    version, why = library(options.get("lib"))
    if version is None:
        raise SuperfluidError(why)
    if (fault := reads(FORMATS, own["--model"])) is not None:
        raise ModelLoadFailed(fault)
    host, port = listen_flags(own)
    engine = ToyEngine(own["--model"], version, os.path.abspath(options["lib"]), max_context_flag(own) or 64)
    return serve_engine(engine, host, port, out, queue=queue_flag(own))
""",
    "worker.py": """\"\"\"``superfluid-worker-toy``: the toy engine's worker command line.\"\"\"

from __future__ import annotations

import sys
from collections.abc import Sequence

from superfluid.runtime.toy.check import check_argv
from superfluid.runtime.worker import check_handlers, engine_handlers, run

PROG = "superfluid-worker-toy"
#: check and version from its one check function; serve from its serve module (plan and install too,
#: which the adapter's defaults refuse)
HANDLERS = {**engine_handlers("superfluid.runtime.toy", PROG), **check_handlers(check_argv)}


def main(argv: Sequence[str] | None = None) -> int:
    return run("toy", argv, HANDLERS)


if __name__ == "__main__":
    sys.exit(main())
""",
}


@dataclass(frozen=True)
class Tree:
    """The copied package with the new engine, its console scripts, and how to run them."""

    root: Path  # pkg/ (on PYTHONPATH: pkg/superfluid is the package), pyproject.toml, bin/, home/
    env: dict[str, str]

    @property
    def package(self) -> Path:
        return self.root / "pkg" / "superfluid"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def run(self, *argv: str | Path, program: str = "superfluid") -> cli.Run:
        """One of the copy's console scripts (``bin/<program>``), in a folder holding no other superfluid."""
        return cli.run(self.bin / program, *argv, env=self.env, cwd=self.root)

    def python(self, *argv: str | Path) -> cli.Run:
        """``python <argv...>`` of the test environment, the copy on PYTHONPATH."""
        return cli.run("python", *argv, env=self.env, cwd=self.root)

    def json(self, *argv: str, program: str = "superfluid", code: int = 0) -> Any:
        done = self.run(*argv, program=program)
        assert done.code == code, done.stderr
        return done.json()


def _layout() -> dict[str, Path]:
    """Import name -> source folder, as pyproject.toml's package-dir maps them (``superfluid`` itself too)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapped = config["tool"]["setuptools"]["package-dir"]
    return {"superfluid": ROOT / "superfluid", **{name: ROOT / folder for name, folder in mapped.items()}}


def _files(top: Path) -> Iterator[Path]:
    for path in sorted(top.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            yield path.relative_to(top)


def _copy(into: Path) -> None:
    """The package's source in its import layout (``superfluid.runtime`` -> ``into/superfluid/runtime``)."""
    for name, folder in sorted(_layout().items()):
        shutil.copytree(folder, into.joinpath(*name.split(".")), ignore=shutil.ignore_patterns("__pycache__"))


def _insert(path: Path, after: str, end: str, line: str) -> None:
    """``line`` added at the end of the block of ``path`` that starts at ``after`` and ends before ``end``."""
    text = path.read_text()
    start = text.index(after)
    at = text.index(end, start + len(after))
    path.write_text(text[:at] + line + text[at:])


def _add_engine(root: Path) -> None:
    """What docs/adapters.md, "Adding an engine", says to do: the engine's folder, its registry line and
    its worker's entry point."""
    folder = root / "pkg" / "superfluid" / "runtime" / ID
    folder.mkdir()
    for name, text in FOLDER.items():
        (folder / name).write_text(text)
    _insert(root / "pkg" / "superfluid" / "runtime" / "registry.py", "_ADAPTERS = {\n", "}\n", LINE)
    _insert(root / "pyproject.toml", "[project.scripts]\n", "\n\n", "\n" + ENTRY.rstrip("\n"))


def _set_up(root: Path) -> None:
    """What the set-up (``pip install -e .``) does for the console scripts: one launcher in ``bin/`` for
    each entry point of pyproject.toml's ``[project.scripts]``, run by the test environment's Python (the
    copy on PYTHONPATH stands in for the editable install)."""
    scripts = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]
    (root / "bin").mkdir()
    for name, target in scripts.items():
        module, func = target.split(":")
        launcher = root / "bin" / name
        launcher.write_text(f"#!{VENV_BIN / 'python'}\nimport sys\nfrom {module} import {func}\n"
                            f"if __name__ == '__main__':\n    sys.exit({func}())\n")
        launcher.chmod(0o755)


def _changes(package: Path) -> tuple[set[Path], list[str]]:
    """What the copy has that the source has not: (new files, the registry's changed lines)."""
    source: dict[Path, Path] = {}
    for name, folder in _layout().items():
        for rel in _files(folder):
            source[Path(*name.split(".")[1:]) / rel] = folder / rel
    copied = set(_files(package))
    assert set(source) <= copied, f"missing from the copy: {sorted(set(source) - copied)}"
    changed = [rel for rel in source if not filecmp.cmp(source[rel], package / rel, shallow=False)]
    assert changed in ([], [Path("runtime/registry.py")]), changed
    registry_py = Path("runtime/registry.py")
    return copied - set(source), _changed_lines(source[registry_py], package / registry_py)


def _changed_lines(before: Path, after: Path) -> list[str]:
    diff = difflib.ndiff(before.read_text().splitlines(True), after.read_text().splitlines(True))
    return [line for line in diff if line[:1] in "+-"]


@pytest.fixture(scope="module")
def toy_tree(tmp_path_factory: pytest.TempPathFactory) -> Tree:
    root = tmp_path_factory.mktemp("fifth")
    _copy(root / "pkg")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    _add_engine(root)
    _set_up(root)
    (root / "home").mkdir()
    (root / "libtoy").write_text("TOYLIB 1.0\n")  # the toy library: a file that states its version
    (root / "m.toy").write_bytes(b"TOY1" + bytes(60))  # a model of its format
    env = cli.environment(root / "home", PYTHONPATH=str(root / "pkg"), PYTHONDONTWRITEBYTECODE="1")
    return Tree(root, env)


def test_the_copy_differs_from_the_source_by_the_folder_one_line_and_one_entry_point(toy_tree: Tree) -> None:
    added, lines = _changes(toy_tree.package)
    assert added == {Path("runtime") / ID / name for name in FOLDER}
    assert lines == ["+ " + LINE]
    assert _changed_lines(ROOT / "pyproject.toml", toy_tree.root / "pyproject.toml") == ["+ " + ENTRY]


def test_the_copy_is_what_runs(toy_tree: Tree) -> None:
    """PYTHONPATH wins over the editable install's finder: the commands below run the copy."""
    done = toy_tree.python("-c", "import superfluid, superfluid.runtime.registry as r; print(superfluid.__file__); "
                                 "print(r.__file__); print(' '.join(r.IDS))")
    assert done.code == 0, done.stderr
    package, registry_py, ids = done.stdout.splitlines()
    assert package == str(toy_tree.package / "__init__.py")
    assert registry_py == str(toy_tree.package / "runtime" / "registry.py")
    assert ids.split() == [*registry.IDS, ID]


def test_runtimes_lists_it(toy_tree: Tree) -> None:
    """Its worker, found beside ``superfluid`` as the set-up put it, is asked as every worker is."""
    rows = toy_tree.json("runtimes", "--json")
    assert [r["id"] for r in rows] == [*registry.IDS, ID]
    toy = rows[-1]
    assert (toy["state"], toy["ready"]) == ("not installed", "the toy engine has nothing to load")
    assert toy["installable"] is None and [o["name"] for o in toy["options"]] == ["speed", "lib"]
    assert toy["worker"] == {"path": str(toy_tree.bin / f"superfluid-worker-{ID}"), "source": "beside superfluid"}
    text = toy_tree.run("runtimes")
    assert text.code == 0 and f"\n{ID}: the toy engine has nothing to load\n" in text.stdout


def test_it_passes_the_conformance_kit(toy_tree: Tree) -> None:
    """The kit every adapter runs on itself, its worker run as the console script the set-up made,
    serving a model with its library named as ``superfluid serve`` names it (``--toy-lib``)."""
    worker = toy_tree.bin / f"superfluid-worker-{ID}"
    done = toy_tree.python("-m", "superfluid.runtime.conformance", ID, "--worker", worker, "--model",
                           toy_tree.root / "m.toy", f"--{ID}-lib", toy_tree.root / "libtoy")
    assert done.code == 0, done.stdout + done.stderr
    assert done.stdout == f"{ID} conforms: its declarations, formats, check report and worker command line keep " \
                          "the worker contract, and it serves m.toy as a host asks\n"
    report = toy_tree.run("check", program=f"superfluid-worker-{ID}").json()
    assert report["formats"][0]["id"] == ID and report["tokenizer"] == {"from": "engine"}
    assert report["capabilities"] == {} and report["runtime"]["aliases"] == []


@pytest.mark.parametrize("flag", [f"--{ID}-lib", "--lib"])
def test_runtime_check_takes_its_library_flag(toy_tree: Tree, flag: str) -> None:
    """``runtime check <id> --<id>-lib P`` reaches the worker as spelled, as ``--lib P`` does."""
    lib = toy_tree.root / "libtoy"
    done = toy_tree.run("runtime", "check", ID, flag, lib)
    assert (done.code, done.stdout) == (0, f"{ID}: available (1.0)\n"), done.stderr
    report = toy_tree.json("runtime", "check", ID, flag, str(lib), "--model", str(toy_tree.root / "m.toy"), "--json")
    assert (report["library"], report["model"]["reads"]) == (str(lib), True)
    missing = toy_tree.run("runtime", "check", ID, flag, toy_tree.root / "nope")
    assert missing.code == 1 and missing.stderr == f"superfluid: {toy_tree.root / 'nope'}: No such file or directory\n"


def test_runtime_check_refuses_both_spellings(toy_tree: Tree) -> None:
    done = toy_tree.run("runtime", "check", ID, "--lib", "a", f"--{ID}-lib", "b")
    assert done.code == 2 and f"--{ID}-lib and --lib name the same option: give one" in done.stderr


def test_serve_serves_it(toy_tree: Tree) -> None:
    """``superfluid serve`` chooses it by the model's format, checks it and serves with its worker."""
    lib = toy_tree.root / "libtoy"
    server = SuperfluidServe([str(toy_tree.bin / "superfluid"), "serve", "--model", str(toy_tree.root / "m.toy"),
                              f"--{ID}-lib", str(lib), f"--{ID}-speed", "3", "--port", "0"], toy_tree.env)
    try:
        assert (server.ready["runtime"], server.ready["version"], server.ready["model"]) == (ID, "1.0", "m.toy")
        assert server.ready["where"] == f"library: {lib}, named by --{ID}-lib"
        status, models = server.request("GET", "/v1/models")
        assert status == 200 and [(m["id"], m["owned_by"]) for m in models["data"]] == [("m", ID)]
        played = server.complete(prompt="Hello", max_tokens=3)["choices"][0]
        assert (played["text"], played["finish_reason"]) == ("Hel", "length")
        played = server.complete(prompt="Hi", max_tokens=10)["choices"][0]
        assert (played["text"], played["finish_reason"]) == ("Hi", "stop")
    finally:
        code, _, err = server.stop()
    assert code == 0, err


def test_install_says_it_has_no_installer(toy_tree: Tree) -> None:
    done = toy_tree.run("runtime", "install", ID)
    assert done.code == 1, done.stderr
    assert f"this superfluid has no installer for the {ID} runtime: its recipe names no releases repository" \
        in done.stderr


def test_compat_holds_its_part(toy_tree: Tree) -> None:
    doc = toy_tree.json("compat", "--json")
    assert "unanswered" not in doc and list(doc["runtimes"]) == [*registry.IDS, ID]
    assert doc["runtimes"][ID]["tags"] == ["t7", "t3"]
    text = toy_tree.run("compat")
    assert text.code == 0, text.stderr
    assert f"{ID}: tested with these toy tags\n  TAG\n  t7\n  t3\n  options: speed, lib\n" in text.stdout


def test_runtime_versions_and_options_answer_for_it(toy_tree: Tree) -> None:
    versions = toy_tree.json("runtime", "versions", ID, "--json")
    assert [v["version"] for v in versions] == ["t7", "t3"]
    assert [o["name"] for o in toy_tree.json("runtime", "options", ID, "--json")] == ["speed", "lib"]


def test_serve_shows_its_flag_and_takes_its_options(toy_tree: Tree) -> None:
    done = toy_tree.run("serve", "--help")
    assert done.code == 0 and "--toy-speed N" in done.stdout and "how fast the toy plays" in done.stdout
    done = toy_tree.run("serve", "--model", toy_tree.root / "m.toy", "--toy-speed", "10")
    assert done.code == 2 and "--toy-speed" in done.stderr and "from 1 to 9" in done.stderr, done.stderr


def test_the_manifest_chooses_by_its_question(toy_tree: Tree) -> None:
    doc = toy_tree.json("compat", "--json")
    folder = toy_tree.root / "releases" / "r0.1.0"
    folder.mkdir(parents=True)
    (folder / "superfluid_toolchain-0.1.0.tar.gz.compat.json").write_text(json.dumps(doc, indent=2) + "\n")
    site = toy_tree.root / "site"
    done = toy_tree.run("export", "--source", folder.parent, site, program="superfluid-manifest")
    assert done.code == 0, done.stderr
    answer = json.loads((site / "v1" / "choose" / ID / "tag" / "t7.json").read_text())
    assert answer["asked"] == {"runtime": ID, "tag": "t7", "platform": None}
    assert answer["question"] == f"{ID} tag t7"
    assert [(r["version"], r["by"]) for r in answer["drives"]] == [("0.1.0", "tested")]
    assert (site / "v1" / "choose" / ID / "tag" / "t3" / "linux-x64.json").is_file()
    page = (site / "index.html").read_text()
    assert "<th>toy tags</th>" in page and "<td>t7, t3</td>" in page and f"/v1/choose/{ID}/tag/&lt;T&gt;.json" in page
    check = toy_tree.run("check", "--source", folder.parent, program="superfluid-manifest")
    assert check.code == 0 and "TOY" in check.stdout.splitlines()[0], check.stderr
    # the face asks the export by the flag the presentation's question declares
    asked = toy_tree.json("compat", "--service", str(site), "--runtime", ID, "--tag", "t3", "--json",
                          "--insecure-no-freshness")
    assert [r["by"] for r in asked["drives"]] == ["tested"]
    others = toy_tree.json("compat", "--service", str(site), "--runtime", ID, "--tag", "t9", "--json",
                           "--insecure-no-freshness", code=1)
    assert "has no answer for toy tag t9" in others["error"]["message"]
    done = toy_tree.run("compat", "--service", site, "--runtime", ID, "--tag", "7", "--insecure-no-freshness")
    assert done.code == 2 and "--tag: tag '7' is malformed: expected a toy tag, e.g. t7" in done.stderr
    assert "--tag T" in toy_tree.run("compat", "--help").stdout


@pytest.mark.parametrize("argv", [["runtime", "versions", ID, "--json"], ["runtime", "options", "basert", "--json"],
                                  ["runtime", "check", ID, "--json"]], ids=["versions", "options", "check"])
def test_a_command_about_one_runtime_imports_its_adapter_alone(toy_tree: Tree, argv: list[str]) -> None:
    """Adapters are imported when asked (``registry.get``), not to build the command line."""
    done = toy_tree.python("-c", "import contextlib, io, sys\n"
                                 "from superfluid.cli import main\n"
                                 "with contextlib.redirect_stdout(io.StringIO()):\n"
                                 "    main(sys.argv[1:])\n"
                                 "print(' '.join(sorted(m for m in sys.modules if m.endswith('.adapter'))))", *argv)
    assert done.code == 0, done.stderr
    assert done.stdout.split() == ["superfluid.runtime.adapter", f"superfluid.runtime.{argv[2]}.adapter"]
