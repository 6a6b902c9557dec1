"""``installer/home/steps.check_staged``: an extracted build is checked before the probe loads it: a link
that leads nowhere, a shared object the loader cannot read, and needs the host does not meet are each
refused, naming the file (issue 31)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from superfluid.installer.home.steps import check_staged
from superfluid.runtime.hostfacts.host import Host, detect
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.planning import Plan, PlanAsset
from superfluid.runtime.probe import ProbeRefused
from tests.conftest import native_script

PLAN = Plan(id="llamacpp", version="b11312", backend="cpu", tested=False, chosen_by="untested", abi=None, why="",
            assets=(PlanAsset(name="llama-b11312-bin-ubuntu-x64.tar.gz", url="file:///x", sha256=None, size=None,
                              digest_source="computed"),))


def _staged(tmp_path: Path, lib_dir: Path, *, raise_need: bool = False) -> Path:
    helper = native_script("raise_need")
    (helper.raise_need if raise_need else helper.copy_build)(lib_dir, tmp_path / "staging" / "lib")
    return tmp_path / "staging"


def test_a_build_made_here_passes(tmp_path: Path, libllama_v1: Path) -> None:
    check_staged(PLAN, _staged(tmp_path, libllama_v1), detect({}))


def test_a_build_for_a_newer_glibc_is_refused_naming_the_file(tmp_path: Path, libllama_v1: Path) -> None:
    staging = _staged(tmp_path, libllama_v1, raise_need=True)
    with pytest.raises(ProbeRefused) as e:
        check_staged(PLAN, staging, detect({}))
    assert e.value.message.startswith("llamacpp b11312-cpu: libllama.so.0.5.0 needs GLIBC_2.99; this host has glibc ")
    assert e.value.fixes == (Fix.superfluid("runtime", "versions", "llamacpp",
                                            does="lists the builds that install here"),)
    assert "tested" not in e.value.message


def test_a_musl_host_refuses_a_glibc_build(tmp_path: Path, libllama_v1: Path) -> None:
    with pytest.raises(ProbeRefused, match="this host's C library is musl"):
        check_staged(PLAN, _staged(tmp_path, libllama_v1), Host(os="linux", arch="x64", libc="musl"))


def test_a_library_the_host_lacks_is_named(tmp_path: Path, libllama_v1: Path) -> None:
    host = Host(os="linux", arch="x64", libc="glibc", glibc="2.36", libraries={"libstdc++.so.6": "/x",
                                                                               "libgcc_s.so.1": "/x"})
    with pytest.raises(ProbeRefused, match=r"needs libgomp.so.1, which is on none of this host's library paths"):
        check_staged(PLAN, _staged(tmp_path, libllama_v1), host)


def test_a_dangling_link_is_refused_naming_it(tmp_path: Path, libllama_v1: Path) -> None:
    staging = _staged(tmp_path, libllama_v1)
    os.symlink("libggml-vulkan.so.0.25.3", staging / "lib" / "libggml-vulkan.so")
    with pytest.raises(ProbeRefused, match=r"lib/libggml-vulkan.so is a link to libggml-vulkan.so.0.25.3, which the "
                                           r"archive does not hold"):
        check_staged(PLAN, staging, detect({}))


def test_a_shared_object_the_loader_cannot_read_is_refused(tmp_path: Path, libllama_v1: Path) -> None:
    staging = _staged(tmp_path, libllama_v1)
    (staging / "lib" / "libggml-extra.so").write_bytes((libllama_v1 / "libllama.so").read_bytes()[:200])
    with pytest.raises(ProbeRefused, match="a shared object is not one the loader can read: libggml-extra.so: "):
        check_staged(PLAN, staging, detect({}))


def test_a_dangling_link_in_a_subfolder_is_found_and_the_first_in_order_named(tmp_path: Path,
                                                                               libllama_v1: Path) -> None:
    staging = _staged(tmp_path, libllama_v1)
    for folder, name in (("b/deep", "z.so"), ("a", "y.so"), ("b", "x.so")):
        (staging / "lib" / folder).mkdir(parents=True, exist_ok=True)
        os.symlink("nowhere.so", staging / "lib" / folder / name)
    os.symlink("b", staging / "lib" / "c")  # a link to a folder leads somewhere: never followed
    with pytest.raises(ProbeRefused, match=r"lib/a/y.so is a link to nowhere.so"):  # as os.walk orders them
        check_staged(PLAN, staging, detect({}))
    os.unlink(staging / "lib" / "a" / "y.so")
    with pytest.raises(ProbeRefused, match=r"lib/b/x.so is a link"):  # a folder's own names before its subfolders
        check_staged(PLAN, staging, detect({}))
