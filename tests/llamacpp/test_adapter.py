"""``runtime/llamacpp/adapter``: its declarations from the recipe alone (tested builds and their
layouts, the options of SPEC §7, versions newest first per host)."""

from __future__ import annotations

from pathlib import Path

from superfluid.runtime.hostfacts.host import Host
from superfluid.runtime.kernel.lookup import read
from superfluid.runtime.llamacpp.adapter import ADAPTER as LLAMACPP
from tests.declarations.conftest import LINUX_X64 as ENV_LINUX_X64
from tests.declarations.conftest import SPEC_LLAMA_OPTIONS, empty_home_env
from tests.declarations.conftest import version_rows as _rows

LINUX_X64 = Host(os="linux", arch="x64")
MACOS_ARM64 = Host(os="macos", arch="arm64")


def test_llamacpp_compat_lists_the_tested_builds_with_their_layouts() -> None:
    part = LLAMACPP.compat()
    assert [(t["build"], t["layout"]) for t in part["tested"]] == [("b11642", "v2"), ("b11284", "v1")]


def test_llamacpp_options_are_the_spec_list() -> None:
    assert [o.name for o in LLAMACPP.options()] == SPEC_LLAMA_OPTIONS


def test_llamacpp_versions_newest_first() -> None:
    rows = _rows(LLAMACPP.versions(LINUX_X64, ["b11284-vulkan"]))
    assert list(rows) == ["b11642", "b11284"]
    assert rows["b11642"]["install"] == "b11642-cpu" and rows["b11642"]["installs"] is True
    assert rows["b11284"]["installed"] is True and rows["b11642"]["installed"] is False
    assert rows["b11642"]["layout"] == "v2"
    mac = _rows(LLAMACPP.versions(MACOS_ARM64, []))
    assert mac["b11642"]["install"] == "b11642-metal"


def test_llamacpp_nothing_to_load(home: Path, tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    worker = str(bindir / "superfluid-worker-llamacpp")
    env = empty_home_env(home, ENV_LINUX_X64)
    why = LLAMACPP.nothing_to_load(read(env), worker)
    assert why is not None and why.message.startswith(f"llama.cpp not found (looked for libllama.so in {bindir}, ")
    assert why.fixes[0].argv == ("superfluid", "runtime", "install", "llamacpp")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libllama.so").write_bytes(b"")
    assert LLAMACPP.nothing_to_load(read(env), worker) is None  # beside the worker: its ../lib
    (tmp_path / "lib" / "libllama.so").unlink()
    assert LLAMACPP.nothing_to_load(read(dict(env, SUPERFLUID_LLAMA_LIB=str(tmp_path / "gone.so"))), worker) is not None
    named = tmp_path / "named.so"
    named.write_bytes(b"")
    assert LLAMACPP.nothing_to_load(read(dict(env, SUPERFLUID_LLAMA_LIB=str(named))), worker) is None
