"""The layout of SUPERFLUID_HOME (SPEC §3): where the home is, each fixed path in it, which entries
of a runtime directory are installs, and the callers that must agree on it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import tomllib

from superfluid.installer.cache.stores import Cache
from superfluid.installer.home.installs import BadName, check_install_name, list_installs
from superfluid.runtime import registry
from superfluid.runtime.kernel import layout as h


@pytest.mark.parametrize(("env", "want"), [
    pytest.param({"SUPERFLUID_HOME": "/srv/sf", "HOME": "/root"}, "/srv/sf", id="set"),
    pytest.param({"SUPERFLUID_HOME": "/srv/sf/../sf2/", "HOME": "/root"}, "/srv/sf2", id="set-normalized"),
    pytest.param({"SUPERFLUID_HOME": "", "HOME": "/home/u"}, "/home/u/.superfluid", id="empty-is-unset"),
    pytest.param({"HOME": "/home/u"}, "/home/u/.superfluid", id="unset"),
    pytest.param({"HOME": "relative"}, "/.superfluid", id="relative-HOME-is-not-trusted"),
])
def test_home(env: dict[str, str], want: str) -> None:
    assert h.home(env) == want


def test_a_relative_home_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert h.home({"SUPERFLUID_HOME": "sf"}) == str(tmp_path / "sf")


@pytest.mark.parametrize(("path", "want"), [
    pytest.param(lambda: h.runtimes_dir("/H"), "/H/runtimes", id="runtimes"),
    pytest.param(lambda: h.runtime_dir("/H", "basert"), "/H/runtimes/basert", id="runtime"),
    pytest.param(lambda: h.current_dir("/H", "basert"), "/H/runtimes/basert/current", id="current"),
    pytest.param(lambda: h.current_lib("/H", "llamacpp"), "/H/runtimes/llamacpp/current/lib", id="current-lib"),
    pytest.param(lambda: h.current_worker("/H", "mlx"), "/H/runtimes/mlx/current/bin/superfluid-worker-mlx",
                 id="current-worker"),
    pytest.param(lambda: h.worker_path("llamacpp"), "bin/superfluid-worker-llamacpp", id="worker-in-an-install"),
    pytest.param(lambda: h.install_dir("/H", "basert", "0.4.0-cpu"), "/H/runtimes/basert/0.4.0-cpu", id="install"),
    pytest.param(lambda: h.install_lib("/I"), "/I/lib", id="install-lib"),
    pytest.param(lambda: h.install_worker("/I", "mlx"), "/I/bin/superfluid-worker-mlx", id="install-worker"),
    pytest.param(lambda: h.install_receipt("/I"), "/I/runtime.json", id="install-receipt"),
    pytest.param(lambda: h.install_env("/I"), "/I/env", id="install-env"),
    pytest.param(lambda: h.cache_dir("/H"), "/H/cache", id="cache"),
    pytest.param(lambda: h.cache_file("/H", "answers.json"), "/H/cache/answers.json", id="cache-file"),
    pytest.param(lambda: h.cache_file("/H", "validated", "s-0"), "/H/cache/validated/s-0", id="cache-file-below"),
    pytest.param(lambda: h.keys_dir("/H"), "/H/keys", id="keys"),
    pytest.param(lambda: os.path.join("/H/runtimes/basert", h.PINNED), "/H/runtimes/basert/pinned", id="pinned"),
    pytest.param(lambda: os.path.join("/H/runtimes/basert", h.LOCK), "/H/runtimes/basert/.install.lock", id="lock"),
    pytest.param(lambda: str(Cache.for_home("/H").root), "/H/cache", id="the-download-cache-is-the-home-cache"),
])
def test_paths(path: Callable[[], str], want: str) -> None:
    assert path() == want


@pytest.mark.parametrize(("name", "install"), [
    pytest.param("0.4.0-cpu", True, id="install"),
    pytest.param("b11642-cuda-12.4", True, id="install-with-dots"),
    pytest.param("current", False, id="current"),
    pytest.param("pinned", False, id="pinned"),
    pytest.param(".install.lock", False, id="lock"),
    pytest.param(".staging-1.0-cpu-12-0123456789abcdef", False, id="staging"),
    pytest.param(".staging-7", False, id="daemon-staging"),
])
def test_is_install_entry(name: str, install: bool) -> None:
    assert h.is_install_entry(name) is install


@pytest.mark.parametrize("name", ["current", "pinned"])
def test_names_the_layout_takes_are_no_install_names(name: str) -> None:
    assert not h.is_install_entry(name)
    with pytest.raises(BadName, match="is not an install name"):
        check_install_name(name)


@pytest.fixture
def runtime(tmp_path: Path) -> Path:
    """A runtime directory with two installs (receipts that do not read: still installs) and every
    kind of entry that is not one."""
    root = Path(h.runtime_dir(tmp_path, "demo"))
    for name in ("1.0-cpu", "2.0-cpu", ".staging-3.0-cpu-1-0123456789abcdef"):
        (root / name).mkdir(parents=True)
        (root / name / "runtime.json").write_text("{}")
    (root / "current").symlink_to("2.0-cpu")
    (root / "linked").symlink_to("1.0-cpu")
    (root / "pinned").write_text("1.0-cpu\n")
    (root / ".install.lock").write_text("")
    (root / "stray-file").write_text("")
    return tmp_path


def test_installs_in(runtime: Path) -> None:
    assert h.installs_in(h.runtime_dir(runtime, "demo")) == ["1.0-cpu", "2.0-cpu"]


def test_installs_in_an_absent_runtime(tmp_path: Path) -> None:
    assert h.installs_in(h.runtime_dir(tmp_path, "demo")) == []


def test_the_worker_and_the_store_list_the_same_installs(runtime: Path) -> None:
    """``versions --json`` (the worker) and ``superfluid runtimes`` (the store) see one set."""
    by_store = sorted(i.name for i in list_installs(h.runtime_dir(runtime, "demo")))
    by_worker = h.installed_installs("demo", str(runtime))
    assert by_store == by_worker == ["1.0-cpu", "2.0-cpu"]


def test_the_worker_beside_superfluid_is_known_through_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "superfluid-worker-llamacpp").write_text("")
    monkeypatch.setattr(h.sys, "argv", [str(bindir / "superfluid")])
    link = tmp_path / "link-to-it"
    link.symlink_to(bindir / "superfluid-worker-llamacpp")
    assert h.shipped_worker(str(bindir / "superfluid-worker-llamacpp"), "llamacpp")
    assert h.shipped_worker(str(link), "llamacpp")
    assert not h.shipped_worker(str(bindir / "superfluid-worker-llamacpp"), "basert")
    (tmp_path / "superfluid-worker-llamacpp").write_text("")
    assert not h.shipped_worker(str(tmp_path / "superfluid-worker-llamacpp"), "llamacpp")


def test_each_workers_module_is_the_one_its_console_script_runs() -> None:
    """``worker_module`` says what pyproject's ``[project.scripts]`` gives ``superfluid-worker-<id>``."""
    scripts = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())["project"]["scripts"]
    for rid in registry.IDS:
        assert scripts[h.worker_command(rid)] == f"{h.worker_module(rid)}:main"
