"""Host facts read once, checked once (issue 42, design point 5, items 1, 12, 13, 14 and 15), measured from
outside: every ``SUPERFLUID_HOST_*`` variable given nonsense is exit 2 naming it, never a traceback, on
each command that reads the host; and ``doctor`` says the facts its ``--json`` holds."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from superfluid.runtime.hostfacts.overrides import TABLE
from tests import cli
from tests.cli import Run
from tests.runtime.fake_roots import lay_out

#: the commands that read the host facts (issue 42's measure)
COMMANDS = (("doctor",), ("doctor", "--json"), ("runtimes", "--json"), ("runtime", "versions", "llamacpp", "--json"),
            ("runtime", "install", "llamacpp", "--dry-run"))
#: the kinds of nonsense the issue measured with, but empty (which is unset)
NONSENSE = ("nan", "-5", "1e309", "abc", "1" * 10240, "\u0666.\u0661", "6.1,,,", "gfx")


def _env(home: Path, **facts: str) -> dict[str, str]:
    """A run's environment: no network (GitHub at a port nothing listens on), ``facts`` set."""
    return cli.environment(home, SUPERFLUID_GITHUB_API="http://127.0.0.1:9", **facts)


def _refused(done: Run, name: str, argv: tuple[str, ...]) -> None:
    """``done`` is exit 2 naming ``name``, in text or as a --json error, and no traceback."""
    assert "Traceback" not in done.stderr, done.stderr
    assert done.code == 2, (argv, name, done.stderr[-400:])
    said = json.loads(done.stdout)["error"]["message"] if "--json" in argv else done.stderr
    assert said.startswith(name) or f": {name} " in said, said[:300]
    assert len(said) < 1000  # a 10 KB value is not repeated whole


def test_every_override_given_nonsense_is_exit_2_naming_it_on_every_command(home: Path, tmp_path: Path) -> None:
    """Each variable on each of the five commands, the value of nonsense turning with them (the parser's
    own test gives every variable every kind, tests/runtime/hostfacts/test_overrides.py)."""
    cases = [(name, NONSENSE[(i + j) % len(NONSENSE)], argv) for i, name in enumerate(TABLE)
             for j, argv in enumerate(COMMANDS)]

    def one(case: tuple[str, str, tuple[str, ...]]) -> tuple[str, tuple[str, ...], Run]:
        name, value, argv = case
        return name, argv, cli.run("superfluid", *argv, env=_env(home, **{name: value}), cwd=tmp_path, timeout=60)

    with ThreadPoolExecutor(2) as pool:
        for name, argv, done in pool.map(one, cases):
            _refused(done, name, argv)


def test_empty_is_unset(home: Path) -> None:
    cli.run("superfluid", "doctor", "--json", env=_env(home))  # the recipes' validation stamped: the cache exists
    plain = cli.run("superfluid", "doctor", "--json", env=_env(home))
    empty = cli.run("superfluid", "doctor", "--json", env=_env(home, **dict.fromkeys(TABLE, "")))
    assert empty.code == plain.code == 0 and empty.json() == plain.json()


@pytest.mark.parametrize("argv", [("doctor",), ("runtimes",), ("runtime", "install", "llamacpp", "--dry-run")])
@pytest.mark.parametrize("value", ["nan", "-5", "1.5X"])
def test_memory_out_of_its_form_is_refused(home: Path, argv: tuple[str, ...], value: str) -> None:
    """Item 1: a ValueError traceback for nan, -5 shown as memory -5."""
    done = cli.run("superfluid", *argv, env=_env(home, SUPERFLUID_HOST_MEMORY=value))
    _refused(done, "SUPERFLUID_HOST_MEMORY", argv)
    assert "not bytes: a whole number such as 68719476736" in done.stderr


def test_memory_in_units_is_bytes(home: Path) -> None:
    doc = cli.run("superfluid", "doctor", "--json", env=_env(home, SUPERFLUID_HOST_MEMORY="1.5G")).json()
    assert doc["host"]["memory"] == 1610612736
    text = cli.run("superfluid", "doctor", env=_env(home, SUPERFLUID_HOST_MEMORY="1.5G")).stdout
    assert "  memory          1.5 GiB (set by SUPERFLUID_HOST_MEMORY)\n" in text  # issue 44: a fact set is marked


def test_a_malformed_driver_is_named_not_taken_for_none(home: Path) -> None:
    """Item 14: ``=abc`` said "no cuda build of llamacpp is planned" (the wrong reason)."""
    argv = ("runtime", "install", "llamacpp", "--dry-run", "--backend", "cuda")
    done = cli.run("superfluid", *argv, env=_env(home, SUPERFLUID_HOST_NVIDIA_DRIVER="abc"))
    _refused(done, "SUPERFLUID_HOST_NVIDIA_DRIVER", argv)
    assert "not a version such as 580.95.05, or none" in done.stderr and "is planned" not in done.stderr


def test_a_rocm_version_says_rocm_is_there(home: Path) -> None:
    """Item 15: a ROCm version and gfx target, and doctor said "ROCm no"."""
    env = _env(home, SUPERFLUID_HOST_OS="linux", SUPERFLUID_HOST_ROCM_VERSION="10.1",
               SUPERFLUID_HOST_ROCM_GFX="gfx1100")
    text = cli.run("superfluid", "doctor", env=env).stdout
    assert "  ROCm            yes, version 10.1 (set by SUPERFLUID_HOST_ROCM_VERSION)\n" in text
    assert "  ROCm GPUs       gfx1100 (set by SUPERFLUID_HOST_ROCM_GFX)\n" in text
    doc = cli.run("superfluid", "doctor", "--json", env=env).json()
    assert (doc["host"]["rocm"], doc["host"]["rocm_version"], doc["host"]["rocm_gfx"]) == (True, "10.1", ["gfx1100"])


@pytest.fixture
def cuda_root(tmp_path: Path) -> Path:
    """A Debian root whose CUDA folder (on the loader's paths) holds libcudart.so.13 (13.0.48)."""
    root = lay_out(tmp_path / "debian", "debian")
    folder = root / "opt" / "cuda" / "lib"
    folder.mkdir(parents=True)
    (folder / "libcudart.so.13.0.48").write_bytes(b"")
    os.symlink("libcudart.so.13.0.48", folder / "libcudart.so.13")
    return root


def _doctor(home: Path, root: Path) -> tuple[dict[str, object], str]:
    env = _env(home, SUPERFLUID_HOST_ROOT=str(root), SUPERFLUID_HOST_ARCH="x64", SUPERFLUID_HOST_OS="linux",
               SUPERFLUID_HOST_LIBRARY_PATH="/opt/cuda/lib:/usr/lib/x86_64-linux-gnu")
    doc = cli.run("superfluid", "doctor", "--json", env=env)
    text = cli.run("superfluid", "doctor", env=env)
    assert doc.code == text.code == 0, doc.stderr + text.stderr
    return doc.json()["host"], next(line for line in text.stdout.splitlines() if line.startswith("  CUDA runtime"))


def test_doctor_says_the_cuda_runtime_its_json_holds(home: Path, cuda_root: Path) -> None:
    """Item 13: a libcudart.so.13 the loader reaches, and doctor said "CUDA runtime none" where its
    --json said reachable: one set of facts, and the path found."""
    host, line = _doctor(home, cuda_root)
    path = "/opt/cuda/lib/libcudart.so.13"
    assert (host["cuda_runtime"], host["cuda_runtime_path"], host["cuda_runtime_reachable"]) == (None, path, True)
    assert line == (f"  CUDA runtime    none usable: version 13.0, {path}, on the loader's paths, without "
                    "libcublas.so.13 beside it")
    (cuda_root / "opt" / "cuda" / "lib" / "libcublas.so.13").write_bytes(b"")
    host, line = _doctor(home, cuda_root)
    assert (host["cuda_runtime"], host["cuda_runtime_version"], host["cuda_runtime_path"]) == (13, "13.0", path)
    assert line == f"  CUDA runtime    13 (version 13.0, {path}, on the loader's paths)"


def test_doctor_says_what_the_recipe_lists_once(home: Path) -> None:
    """Item 12: "baseRT publishes no bundle for linux-x64" where a mirror carries one (doctor reads the
    recipe alone), and mlx's line said "nothing installs here" twice."""
    env = _env(home, SUPERFLUID_HOST_OS="linux", SUPERFLUID_HOST_ARCH="x64")
    lines = cli.run("superfluid", "doctor", env=env).stdout.splitlines()
    basert = next(line for line in lines if line.startswith("  basert: "))
    assert basert.startswith("  basert: nothing installs here: this superfluid's recipe pins no baseRT bundle for "
                             "linux-x64 (") and "publishes" not in basert
    mlx = next(line for line in lines if line.startswith("  mlx: "))
    assert mlx.count("installs here") == 1 and mlx.endswith(": nothing of mlx installs here")
