"""A fourth engine is its folder and one registry line (issue 20, item 1): a test-only adapter, added to a
copy of the package in its import layout with nothing else changed, is seen by ``superfluid runtimes``,
``compat``, ``runtime versions``/``options``, ``serve --help``, ``compat --service`` and the compat
manifest's choose answers and page (docs/adapters.md is the recipe); its worker keeps the worker contract,
as the conformance kit checks every adapter (issue 33, item 4)."""

from __future__ import annotations

import difflib
import filecmp
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, VENV_BIN

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the 3.10 interpreters have tomli (a dependency)
    import tomli as tomllib

ID = "toy"
#: the registry line the new engine adds
LINE = f'    "{ID}": "superfluid.runtime.{ID}.adapter",\n'
#: the new engine's folder: an adapter with a recipe, and how it is shown; no native code
FOLDER = {
    "__init__.py": '"""A test-only engine."""\n',
    "recipe.json": json.dumps({"tags": ["t7", "t3"], "platforms": ["linux-x64"]}, indent=2) + "\n",
    "adapter.py": '''"""The toy engine's declarations, from its recipe alone."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from superfluid.runtime import contract
from superfluid.runtime.adapter import Adapter
from superfluid.runtime.kernel.options import Option, options_json

#: the one format it reads (its tokenizer is the engine's, and it states no capabilities: the defaults)
FORMATS = ({"id": "toy", "describe": "a toy model file", "file": {"extensions": ["toy"], "magic": "TOY1"}},)
NOTHING = "the toy engine has nothing to load"


class ToyAdapter(Adapter):
    """An engine with a recipe and no native code."""

    id = "toy"
    package = "superfluid.runtime.toy"
    formats_from = "superfluid.runtime.toy.adapter"
    presentation_from = "superfluid.runtime.toy.presentation"
    linked = True

    def compat(self) -> dict[str, Any]:
        return {"tags": list(self.recipe["tags"]), "platforms": list(self.recipe["platforms"]),
                "options": options_json(self.options())}

    def versions(self, host: Any, installed: Collection[str],
                 compat_part: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        return [{"version": t, "installs": "the toy engine installs nowhere", "install": None,
                 "installed": False, "tested": True} for t in self.recipe["tags"]]

    def options(self) -> list[Option]:
        return [Option(name="speed", kind="int", description="how fast the toy plays", default=1, minimum=1,
                       maximum=9)]

    def check(self, argv: list[str], environ: Mapping[str, str]) -> tuple[dict[str, Any], int]:
        model, _ = contract.check_line(argv, self.options())
        facts = self.model_facts()
        report = contract.report(self.id, formats=facts.formats, tokenizer=facts.tokenizer,
                                 capabilities=facts.capabilities)
        report["available"] = NOTHING
        if model is not None:
            report["model"] = {"path": model, "reads": contract.unread(facts.formats, model, NOTHING)}
        return report, 1


ADAPTER = ToyAdapter()
''',
    "presentation.py": '''"""How the toy engine is shown: asked by tag."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from superfluid.runtime.presentation import Presentation, Question, ServeFlag, Shown


class ToyPresentation(Presentation):
    """An engine asked by a kind of question no other engine has (``tag``)."""

    questions = (Question("tag", pattern=r"t[1-9][0-9]*", expected="a toy tag, e.g. t7", metavar="T",
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
''',
    "worker.py": '''"""``superfluid-worker-toy``: the toy engine's worker command line."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from superfluid.runtime.toy.adapter import ADAPTER
from superfluid.runtime.worker import check_handlers, run


def main(argv: Sequence[str] | None = None) -> int:
    return run(ADAPTER, argv, check_handlers(ADAPTER.check))


if __name__ == "__main__":
    sys.exit(main())
''',
}


@dataclass(frozen=True)
class Tree:
    """The copied package with the fourth engine, and how to run its commands."""

    root: Path  # on PYTHONPATH: root/superfluid is the package
    env: dict[str, str]

    def run(self, *argv: str, module: str | None = "superfluid") -> subprocess.CompletedProcess[str]:
        """``python -m <module> <argv...>`` (no module: ``python <argv...>``) with the copy on PYTHONPATH, in
        a folder holding no other superfluid (the first entry of ``sys.path``)."""
        head = ["-m", module] if module else []
        return subprocess.run([str(VENV_BIN / "python"), *head, *argv], env=self.env, cwd=self.root.parent,
                              capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL)

    def json(self, *argv: str, module: str = "superfluid", code: int = 0) -> Any:
        done = self.run(*argv, module=module)
        assert done.returncode == code, done.stderr
        return json.loads(done.stdout)


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


def _add_engine(package: Path) -> None:
    """The engine's folder, and its one line in the registry."""
    folder = package / "runtime" / ID
    folder.mkdir()
    for name, text in FOLDER.items():
        (folder / name).write_text(text)
    registry = package / "runtime" / "registry.py"
    text = registry.read_text()
    start = text.index("_ADAPTERS = {\n")
    end = text.index("}\n", start)
    registry.write_text(text[:end] + LINE + text[end:])


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
    registry = Path("runtime/registry.py")
    diff = difflib.ndiff((source[registry]).read_text().splitlines(True), (package / registry).read_text()
                         .splitlines(True))
    return copied - set(source), [line for line in diff if line[:1] in "+-"]


@pytest.fixture(scope="module")
def toy_tree(tmp_path_factory: pytest.TempPathFactory) -> Tree:
    root = tmp_path_factory.mktemp("fourth")
    _copy(root / "pkg")
    _add_engine(root / "pkg" / "superfluid")
    home = root / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SUPERFLUID_", "BASERT_", "PYTHON"))}
    env.update(PYTHONPATH=str(root / "pkg"), SUPERFLUID_HOME=str(home), PYTHONDONTWRITEBYTECODE="1")
    return Tree(root / "pkg", env)


def test_the_copy_differs_from_the_source_by_the_folder_and_one_line(toy_tree: Tree) -> None:
    added, lines = _changes(toy_tree.root / "superfluid")
    assert added == {Path("runtime") / ID / name for name in FOLDER}
    assert lines == ["+ " + LINE]


def test_the_copy_is_what_runs(toy_tree: Tree) -> None:
    """PYTHONPATH wins over the editable install's finder: the commands below run the copy."""
    done = toy_tree.run("-c", "import superfluid, superfluid.runtime.registry as r; print(superfluid.__file__); "
                          "print(r.__file__); print(' '.join(r.IDS))", module=None)
    assert done.returncode == 0, done.stderr
    package, registry, ids = done.stdout.splitlines()
    assert package == str(toy_tree.root / "superfluid" / "__init__.py")
    assert registry == str(toy_tree.root / "superfluid" / "runtime" / "registry.py")
    assert ids.split() == ["basert", "llamacpp", "mlx", ID]


def test_runtimes_lists_it(toy_tree: Tree) -> None:
    rows = toy_tree.json("runtimes", "--json")
    assert [r["id"] for r in rows] == ["basert", "llamacpp", "mlx", ID]
    toy = rows[-1]
    assert (toy["state"], toy["ready"]) == ("not installed", "the toy engine has nothing to load")
    assert toy["installable"] is None and [o["name"] for o in toy["options"]] == ["speed"]
    text = toy_tree.run("runtimes")
    assert text.returncode == 0 and f"\n{ID}: the toy engine has nothing to load\n" in text.stdout


def test_it_passes_the_conformance_kit(toy_tree: Tree) -> None:
    """The kit every adapter runs on itself, its worker run as its console script would run it."""
    done = toy_tree.run(ID, module="superfluid.runtime.conformance")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == f"{ID} conforms: its declarations, formats, check report and worker command line keep " \
                          "the worker contract\n"
    report = json.loads(toy_tree.run("-m", f"superfluid.runtime.{ID}.worker", "check", module=None).stdout)
    assert report["formats"][0]["id"] == ID and report["tokenizer"] == {"from": "engine"}
    assert report["capabilities"] == {} and report["runtime"]["aliases"] == []


def test_compat_holds_its_part(toy_tree: Tree) -> None:
    doc = toy_tree.json("compat", "--json")
    assert "unanswered" not in doc and list(doc["runtimes"]) == ["basert", "llamacpp", "mlx", ID]
    assert doc["runtimes"][ID]["tags"] == ["t7", "t3"]
    text = toy_tree.run("compat")
    assert text.returncode == 0, text.stderr
    assert f"{ID}: tested with these toy tags\n  TAG\n  t7\n  t3\n  options: speed\n" in text.stdout


def test_runtime_versions_and_options_answer_for_it(toy_tree: Tree) -> None:
    versions = toy_tree.json("runtime", "versions", ID, "--json")
    assert [v["version"] for v in versions] == ["t7", "t3"]
    assert [o["name"] for o in toy_tree.json("runtime", "options", ID, "--json")] == ["speed"]


def test_serve_shows_its_flag_and_takes_its_options(toy_tree: Tree) -> None:
    done = toy_tree.run("serve", "--help")
    assert done.returncode == 0 and "--toy-speed N" in done.stdout and "how fast the toy plays" in done.stdout
    done = toy_tree.run("serve", "--model", str(toy_tree.root), "--toy-speed", "10")
    assert done.returncode == 2 and "--toy-speed" in done.stderr and "from 1 to 9" in done.stderr, done.stderr


def test_the_manifest_chooses_by_its_question(toy_tree: Tree) -> None:
    doc = toy_tree.json("compat", "--json")
    folder = toy_tree.root.parent / "releases" / "r0.1.0"
    folder.mkdir(parents=True)
    (folder / "superfluid_toolchain-0.1.0.tar.gz.compat.json").write_text(json.dumps(doc, indent=2) + "\n")
    site = toy_tree.root.parent / "site"
    done = toy_tree.run("export", "--source", str(folder.parent), str(site), module="superfluid.manifest.command")
    assert done.returncode == 0, done.stderr
    answer = json.loads((site / "v1" / "choose" / ID / "tag" / "t7.json").read_text())
    assert answer["asked"] == {"runtime": ID, "tag": "t7", "platform": None}
    assert answer["question"] == f"{ID} tag t7"
    assert [(r["version"], r["by"]) for r in answer["drives"]] == [("0.1.0", "tested")]
    assert (site / "v1" / "choose" / ID / "tag" / "t3" / "linux-x64.json").is_file()
    page = (site / "index.html").read_text()
    assert "<th>toy tags</th>" in page and "<td>t7, t3</td>" in page and f"/v1/choose/{ID}/tag/&lt;T&gt;.json" in page
    check = toy_tree.run("check", "--source", str(folder.parent), module="superfluid.manifest.command")
    assert check.returncode == 0 and "TOY" in check.stdout.splitlines()[0], check.stderr
    # the face asks the export by the flag the presentation's question declares
    asked = toy_tree.json("compat", "--service", str(site), "--runtime", ID, "--tag", "t3", "--json",
                      "--insecure-no-freshness")
    assert [r["by"] for r in asked["drives"]] == ["tested"]
    others = toy_tree.json("compat", "--service", str(site), "--runtime", ID, "--tag", "t9", "--json",
                       "--insecure-no-freshness", code=1)
    assert "has no answer for toy tag t9" in others["error"]["message"]
    done = toy_tree.run("compat", "--service", str(site), "--runtime", ID, "--tag", "7", "--insecure-no-freshness")
    assert done.returncode == 2 and "--tag: tag '7' is malformed: expected a toy tag, e.g. t7" in done.stderr
    assert "--tag T" in toy_tree.run("compat", "--help").stdout


@pytest.mark.parametrize("argv", [["runtime", "versions", ID, "--json"], ["runtime", "options", "basert", "--json"],
                                  ["runtime", "check", ID, "--json"]], ids=["versions", "options", "check"])
def test_a_command_about_one_runtime_imports_its_adapter_alone(toy_tree: Tree, argv: list[str]) -> None:
    """Adapters are imported when asked (``registry.get``), not to build the command line."""
    done = toy_tree.run("-c", "import contextlib, io, sys\n"
                          "from superfluid.cli import main\n"
                          "with contextlib.redirect_stdout(io.StringIO()):\n"
                          "    main(sys.argv[1:])\n"
                          "print(' '.join(sorted(m for m in sys.modules if m.endswith('.adapter'))))", *argv,
                    module=None)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["superfluid.runtime.adapter", f"superfluid.runtime.{argv[2]}.adapter"]
