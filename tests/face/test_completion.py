"""``superfluid completion bash|zsh|fish`` (issue 15, item 6): one generator, three shells, each run.

bash: the script is sourced by a real bash, ``complete -p superfluid`` names its function, and the
function is called with ``COMP_WORDS``/``COMP_CWORD`` as bash sets them. zsh: sourced after
``compinit`` (it registers itself with ``compdef``) and autoloaded from ``$fpath`` as ``_superfluid``;
its function is called with ``words``/``CURRENT``, ``compadd``/``_files`` stubbed to print what
they are given (they work only inside zsh's completion widget). fish: ``complete -C`` asks fish
itself what it would offer for a command line. The same table of command lines runs in each.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from superfluid.command_index_build import INDEX, index_source, model
from superfluid.commands.completion import render
from superfluid.installer.fleet.plans import HOSTS, PLATFORMS
from superfluid.parser import children, find, parser, walk
from superfluid.runtime import registry
from tests import cli

FILES = {"a.tar.gz", "b.gguf"}  # and the directory sub/, in the working directory
#: the installs of basert in the home the shells complete in (beside current, pinned and a staging directory)
INSTALLS = ("0.4.0-cpu", "0.3.1-cpu")


def _flags(path: str) -> set[str]:
    node = find(parser(), path)
    assert node is not None
    return {s for a in node._actions for s in a.option_strings}


def _option_values(runtime_id: str, name: str) -> set[str]:
    option = next(o for o in registry.get(runtime_id).options() if o.name == name)
    return set(option.values)


def _check_flags(runtime_id: str) -> set[str]:
    names = {o.name for o in registry.get(runtime_id).options()}
    return {"-h", "--help", "--json", "--model"} | {f"--{n}" for n in names} | {f"--{runtime_id}-{n}" for n in names}


#: (words before the cursor, the word at the cursor, what is offered: a set of words, or "files")
CASES = [
    pytest.param([], "", set(children(parser())), id="commands"),
    pytest.param([], "ru", {"runtime", "runtimes"}, id="commands-by-prefix"),
    pytest.param(["runtime"], "", set(children(find(parser(), "runtime"))), id="runtime-subcommands"),  # type: ignore[arg-type]
    pytest.param(["runtime", "install"], "", set(registry.IDS), id="runtime-ids"),
    pytest.param(["runtime", "install", "basert"], "--f", {f for f in _flags("runtime install") if f.startswith("--f")},
                 id="flags-by-prefix"),
    pytest.param(["runtime", "install", "basert", "--from"], "", "files", id="a-flag-taking-a-file"),
    pytest.param(["runtime", "install", "--mirror", "sub", "basert", "--dry-run"], "--js", {"--json"},
                 id="a-flag-value-is-skipped"),
    pytest.param(["runtime", "check", "llamacpp", "--cache-type-k"], "", _option_values("llamacpp", "cache-type-k"),
                 id="an-enum-option-offers-its-values"),
    pytest.param(["runtime", "check", "llamacpp", "--llamacpp-split-mode"], "",
                 _option_values("llamacpp", "split-mode"), id="serve-spelling-of-an-option"),
    pytest.param(["runtime", "check", "basert"], "--", {f for f in _check_flags("basert") if f.startswith("--")},
                 id="a-runtimes-own-options"),
    pytest.param(["runtime", "check", "llamacpp", "--n-gpu-layers"], "", set(), id="a-number-offers-nothing"),
    pytest.param(["completion"], "", {"bash", "zsh", "fish"}, id="completion-shells"),
    pytest.param(["compat"], "--re", {f for f in _flags("compat") if f.startswith("--re")}, id="compat-flags"),
    pytest.param(["runtime", "install", "basert"], "--tr", {"--trust-root"}, id="trust-root-flag"),
    pytest.param(["compat", "--service", "sub", "--trust-root"], "", "files", id="trust-root-takes-a-file"),
    pytest.param(["lock"], "--ins", {"--insecure-no-freshness"}, id="insecure-no-freshness-flag"),
    pytest.param(["cache"], "", {"dir", "du", "prune"}, id="cache-subcommands"),
    pytest.param(["cache", "prune"], "--", {f for f in _flags("cache prune") if f.startswith("--")},
                 id="cache-prune-flags"),
    pytest.param(["cache", "prune", "--keep-lock"], "", "files", id="a-kept-lock-is-a-file"),
    pytest.param(["runtime", "gc"], "", set(registry.IDS), id="gc-runtime-ids"),
    pytest.param(["runtime", "verify", "basert"], "--", {"--help", "--json", "--quiet", "--verbose"},
                 id="verify-flags"),
    # issue 25: values after --runtime, --backend, --platform; install names read from the home; serve's options
    pytest.param(["serve", "--runtime"], "", set(registry.IDS), id="serve-runtime-ids"),
    pytest.param(["lock", "--runtime"], "", set(registry.IDS), id="lock-runtime-ids"),
    pytest.param(["compat", "--runtime"], "ll", {"llamacpp"}, id="compat-runtime-ids"),
    pytest.param(["lock", "--upgrade"], "", set(registry.IDS), id="lock-upgrade-ids"),
    pytest.param(["lock", "--backend"], "", set(HOSTS), id="lock-backends"),
    pytest.param(["runtime", "install", "basert", "--backend"], "c", {"cpu", "cuda"}, id="install-backends"),
    pytest.param(["lock", "--platform"], "", set(PLATFORMS), id="lock-platforms"),
    pytest.param(["compat", "--platform"], "mac", {"macos-x64", "macos-arm64"}, id="compat-platforms"),
    pytest.param(["runtime", "use", "basert"], "", set(INSTALLS), id="use-installs-from-the-home"),
    pytest.param(["runtime", "remove", "basert"], "0.3", {"0.3.1-cpu"}, id="remove-installs-by-prefix"),
    pytest.param(["runtime", "repair", "basert"], "", set(INSTALLS), id="repair-installs"),
    pytest.param(["runtime", "verify", "basert"], "", set(INSTALLS), id="verify-installs"),
    pytest.param(["runtime", "use", "llamacpp"], "", set(), id="no-installs-no-words"),
    pytest.param(["serve"], "--llamacpp-cache-type", {"--llamacpp-cache-type-k", "--llamacpp-cache-type-v"},
                 id="serve-runtime-options"),
    pytest.param(["serve", "--llamacpp-cache-type-k"], "", _option_values("llamacpp", "cache-type-k"),
                 id="serve-option-values"),
    pytest.param(["runtime", "install", "basert"], "--rei", {"--reinstall"}, id="reinstall-flag"),
    # -q and -v take no value: what follows them completes as if they were not there
    pytest.param(["-q"], "", set(children(parser())), id="commands-after-quiet"),
    pytest.param(["runtime", "list", "--verbose"], "", set(registry.IDS), id="runtime-ids-after-verbose"),
]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("completion")
    for name in FILES:
        (d / name).write_text("")
    (d / "sub").mkdir()
    basert = d / "home" / "runtimes" / "basert"
    for name in (*INSTALLS, ".staging-0.5.0-cpu"):
        (basert / name).mkdir(parents=True)
    (basert / "current").symlink_to("0.4.0-cpu")
    (basert / "pinned").write_text("0.4.0-cpu\n")
    for shell in ("bash", "zsh", "fish"):
        done = cli.run("superfluid", "completion", shell, timeout=60)
        assert done.code == 0, done.stderr
        (d / f"script.{shell}").write_text(done.stdout)
    (d / "fpath").mkdir()
    (d / "fpath" / "_superfluid").write_text((d / "script.zsh").read_text())
    return d


def _need(shell: str) -> str:
    path = shutil.which(shell)
    if path is None:
        pytest.skip(f"{shell} is not installed (.ci/run installs it)")
    return path


def _run(argv: list[str], cwd: Path) -> str:
    env = cli.environment(cwd / "home")  # the install names are read from it
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, check=False, env=env)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def _assert_offers(got: set[str], want: set[str] | str, *, files: set[str]) -> None:
    if want == "files":
        assert FILES <= got or got == files, got
    else:
        assert got == want


@pytest.mark.parametrize(("before", "cur", "want"), CASES)
def test_bash(workdir: Path, before: list[str], cur: str, want: set[str] | str) -> None:
    bash = _need("bash")
    words = " ".join(f"'{w}'" for w in ["superfluid", *before, cur])
    out = _run([bash, "--norc", "-c", f"source {workdir / 'script.bash'}; COMP_WORDS=({words}); "
                f"COMP_CWORD={len(before) + 1}; _superfluid; printf '%s\\n' \"${{COMPREPLY[@]}}\""], workdir)
    _assert_offers({w for w in out.splitlines() if w}, want, files=FILES | {"sub"})


def test_bash_registers_the_function_and_sources_from_process_substitution(workdir: Path) -> None:
    bash = _need("bash")
    out = _run([bash, "--norc", "-c", f"source <({cli.script('superfluid')} completion bash); complete -p superfluid"],
               workdir)
    assert out.strip() == "complete -F _superfluid superfluid"


def test_bash_completes_a_value_after_equals(workdir: Path) -> None:
    """bash splits ``--from=a`` into ``--from``, ``=``, ``a`` (COMP_WORDBREAKS)."""
    bash = _need("bash")
    out = _run([bash, "--norc", "-c", f"source {workdir / 'script.bash'}; "
                "COMP_WORDS=(superfluid runtime install basert --from = a); COMP_CWORD=6; _superfluid; "
                "printf '%s\\n' \"${COMPREPLY[@]}\""], workdir)
    assert out.split() == ["a.tar.gz"]


# compadd offers only the words that match what is typed (zsh's PREFIX); the stub does the same
_ZSH_STUBS = ("compadd() { while [[ $1 != -- ]]; do shift; done; shift; local w; for w in \"$@\"; do "
              "[[ $w == ${words[CURRENT]}* ]] && print -r -- $w; done; true }; "
              "_files() { print -r -- FILES }; _message() { : }; compset() { : }; ")


@pytest.mark.parametrize(("before", "cur", "want"), CASES)
def test_zsh(workdir: Path, before: list[str], cur: str, want: set[str] | str) -> None:
    zsh = _need("zsh")
    words = " ".join(f"'{w}'" for w in ["superfluid", *before, cur])
    out = _run([zsh, "-f", "-c", f"autoload -Uz compinit && compinit -u -d {workdir / '.zcompdump'}; "
                f"source {workdir / 'script.zsh'}; {_ZSH_STUBS} words=({words}); CURRENT={len(before) + 2}; "
                "_superfluid"], workdir)
    _assert_offers({w for w in out.splitlines() if w}, want, files={"FILES"})


def test_zsh_registers_with_compdef_when_sourced_and_autoloads_from_fpath(workdir: Path) -> None:
    zsh = _need("zsh")
    sourced = _run([zsh, "-f", "-c", f"autoload -Uz compinit && compinit -u -d {workdir / '.zc1'}; "
                    f"source {workdir / 'script.zsh'}; print -r -- $_comps[superfluid]"], workdir)
    assert sourced.strip() == "_superfluid"
    autoloaded = _run([zsh, "-f", "-c", f"fpath=({workdir / 'fpath'} $fpath); autoload -Uz compinit && "
                       f"compinit -u -d {workdir / '.zc2'}; print -r -- $_comps[superfluid]; {_ZSH_STUBS} "
                       "words=(superfluid completion ''); CURRENT=3; _superfluid"], workdir)
    assert autoloaded.split() == ["_superfluid", "bash", "zsh", "fish"]


@pytest.mark.parametrize(("before", "cur", "want"), CASES)
def test_fish(workdir: Path, before: list[str], cur: str, want: set[str] | str) -> None:
    fish = _need("fish")
    line = " ".join(["superfluid", *before, cur])
    out = _run([fish, "--no-config", "-c", f"source {workdir / 'script.fish'}; complete -C'{line}'"], workdir)
    got = {w.split("\t")[0] for w in out.splitlines() if w}
    _assert_offers(got, want, files=FILES | {"sub/"})


def test_an_unknown_shell_is_a_usage_error() -> None:
    done = cli.run("superfluid", "completion", "tcsh", timeout=60)
    assert done.code == 2 and done.stdout == ""
    assert "invalid choice: 'tcsh'" in done.stderr and "(see 'superfluid completion --help')" in done.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_script_names_every_command_and_is_stable(workdir: Path, shell: str) -> None:
    """Generated from the tree: every command and flag is in it, and twice is the same bytes."""
    text = (workdir / f"script.{shell}").read_text()
    assert render(shell, model(parser())) == text

    for path, node in walk(parser()):
        for flag in {s for a in node._actions for s in a.option_strings}:
            assert flag in text, (shell, path, flag)
        for name in children(node):
            assert name in text, (shell, path, name)


def test_the_kept_index_is_the_tree_as_it_is() -> None:
    """``superfluid/command_index.py`` (what ``completion`` and the overview read, so that they load no
    command: issue 42, item 32) is what the whole tree makes; after a change to a command's flags or
    help, write it again with ``.venv/bin/python -m superfluid.command_index_build``."""
    assert INDEX.read_text(encoding="utf-8") == index_source(), \
        "superfluid/command_index.py is stale: run .venv/bin/python -m superfluid.command_index_build"


@pytest.mark.parametrize("line", [["completion", "bash"], ["--help"], []], ids=" ".join)
def test_completion_and_the_overview_load_no_command_module(line: list[str], tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import contextlib, io, sys\n"
                               "from superfluid.cli import main\n"
                               "out, err = io.StringIO(), io.StringIO()\n"
                               "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
                               f"    main({line!r})\n"
                               "print(sorted(m for m in sys.modules if m.startswith('superfluid.commands.')))"],
        env=cli.environment(tmp_path), capture_output=True, text=True, check=False, timeout=60)
    loaded = "['superfluid.commands.completion']" if line[:1] == ["completion"] else "[]"
    assert done.stdout.strip() == loaded, done.stderr
