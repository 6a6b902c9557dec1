"""``runtime/needs``: what a build needs, measured from real shared objects, as data, and the verdict
on a host, a pure rule tested as a table; a real libllama whose need was raised to ``GLIBC_2.99``
(``tests/native/raise_need.py``) is refused by the real dynamic loader exactly as the verdict says."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import pytest

from superfluid.runtime.hostfacts.elf import ELFInvalid
from superfluid.runtime.hostfacts.host import Host, detect
from superfluid.runtime.hostfacts.needs import (
    InvalidNeeds,
    Needs,
    is_shared_object,
    judge,
    lists_builds,
    measure,
    tree_files,
)
from tests.conftest import native_script

LIBS = {"libc.so.6": "/lib/libc.so.6", "libstdc++.so.6": "/lib/libstdc++.so.6", "libgomp.so.1": "/lib/libgomp.so.1"}
DEBIAN12 = Host(os="linux", arch="x64", glibc="2.36", libc="glibc", glibcxx="3.4.30", cxxabi="1.3.13", libraries=LIBS,
                cpu_features=("avx", "avx2", "f16c", "fma"))
UBUNTU24 = Needs(glibc="2.38", glibcxx="3.4.32", cxxabi="1.3.15", files={"glibc": "libllama.so"})


@pytest.mark.parametrize(("needs", "host", "said"), [
    pytest.param(Needs(glibc="2.34", glibcxx="3.4.30"), DEBIAN12, [], id="ubuntu-22.04-build-on-debian-12"),
    pytest.param(UBUNTU24, DEBIAN12, ["libllama.so needs GLIBC_2.38; this host has glibc 2.36: this build was made "
                                      "for a newer distribution",
                                      "this build needs GLIBCXX_3.4.32; this host's libstdc++ defines GLIBCXX_3.4.30 "
                                      "at most: this build was made for a newer distribution",
                                      "this build needs CXXABI_1.3.15; this host's libstdc++ defines CXXABI_1.3.13 at "
                                      "most: this build was made for a newer distribution"], id="ubuntu-24.04-build"),
    pytest.param(Needs(glibc="2.34"), Host(os="linux", arch="x64", libc="musl", glibcxx="3.4.32", libraries=LIBS),
                 ["this build needs glibc (GLIBC_2.34); this host's C library is musl: this build is made for glibc "
                  "distributions"], id="musl-refuses-glibc"),
    pytest.param(Needs(libraries=("libc.so.6", "libvulkan.so.1")), Host(os="linux", arch="x64", libc="musl",
                                                                        libraries=LIBS),
                 ["this build needs glibc; this host's C library is musl: this build is made for glibc "
                  "distributions"], id="musl-said-once"),
    pytest.param(Needs(libraries=("libc.musl-x86_64.so.1",)), Host(os="linux", arch="x64", libc="musl",
                                                                    libraries={"libc.musl-x86_64.so.1": "/lib/x"}),
                 [], id="a-musl-build-on-musl"),
    pytest.param(Needs(libraries=("libvulkan.so.1", "libm.so.6", "libgomp.so.1")), DEBIAN12,
                 ["this build needs libvulkan.so.1, which is on none of this host's library paths"],
                 id="library-absent-glibc-own-not-looked-for"),
    pytest.param(Needs(libraries=("libvulkan.so.1", "libcuda.so.1", "libcudart.so.13")),
                 Host(os="linux", arch="x64", libc="glibc", vulkan=True, nvidia_driver="580.1", cuda_runtime=13,
                      libraries=LIBS), [], id="stated-devices-speak-for-their-libraries"),
    pytest.param(Needs(libraries=("libvulkan.so.1",)), Host(os="linux", arch="x64"), [], id="libraries-not-probed"),
    pytest.param(Needs(glibc="2.99", glibcxx="3.4.99", cxxabi="1.3.99"), Host(os="linux", arch="arm64"), [],
                 id="a-host-described-knows-nothing"),
    pytest.param(Needs(cpu=("avx512f", "avx2")), DEBIAN12,
                 ["this build needs the CPU features avx512f; this CPU has avx, avx2, f16c, fma"], id="cpu"),
    pytest.param(Needs(cpu=("avx512f",)), Host(os="linux", arch="x64"), [], id="cpu-not-known"),
    pytest.param(Needs(glibc="2.3.4"), Host(os="linux", arch="x64", glibc="2.28", libc="glibc"), [],
                 id="dotted-compare"),
    pytest.param(Needs(glibc="2.28.1"), Host(os="linux", arch="x64", glibc="2.28", libc="glibc"),
                 ["this build needs GLIBC_2.28.1; this host has glibc 2.28: this build was made for a newer "
                  "distribution"], id="longer-is-newer"),
])
def test_judge(needs: Needs, host: Host, said: list[str]) -> None:
    verdict = judge(needs, host)
    assert list(verdict.reasons) == said and verdict.ok is (not said)
    assert str(verdict) == "; ".join(said)


def test_the_subject_is_the_archive_when_no_file_is_named() -> None:
    verdict = judge(Needs(glibc="2.38"), DEBIAN12, build="llama-b11642-bin-ubuntu-arm64.tar.gz")
    assert str(verdict).startswith("llama-b11642-bin-ubuntu-arm64.tar.gz needs GLIBC_2.38; this host has glibc 2.36")
    assert lists_builds("llamacpp").argv == ("superfluid", "runtime", "versions", "llamacpp")


@pytest.mark.parametrize("doc", [
    {"glibc": "2.34", "glibcxx": "3.4.30", "cxxabi": None, "libraries": ["libvulkan.so.1"]},
    {"glibc": None, "glibcxx": None, "cxxabi": "1.3.13", "libraries": [], "cpu": ["avx2"], "files": {"cxxabi": "a.so"}},
])
def test_json_round_trip(doc: dict[str, object]) -> None:
    assert Needs.from_json(doc).to_json() == doc


@pytest.mark.parametrize(("doc", "fault"), [
    ([], "must be an object"),
    ({"glibc": 2.34}, "needs.glibc must be a version"),
    ({"glibcxx": "3.4.x"}, "needs.glibcxx must be a version"),
    ({"libraries": "libx.so"}, "needs.libraries must be a list of names"),
    ({"libraries": ["../../etc/passwd"]}, "needs.libraries must be a list of names"),
    ({"cpu": [1]}, "needs.cpu must be a list"),
    ({"files": {"glibc": 1}}, "needs.files"),
])
def test_bad_json(doc: object, fault: str) -> None:
    with pytest.raises(InvalidNeeds, match=fault):
        Needs.from_json(doc)


@pytest.mark.parametrize(("name", "shared"), [("libllama.so", True), ("libllama.so.0.6.0", True),
                                              ("llama-server", False), ("libggml.a", False), ("LICENSE", False)])
def test_is_shared_object(name: str, shared: bool) -> None:
    assert is_shared_object(name) is shared


def test_measure_a_real_build(libllama_v2: Path) -> None:
    needs = measure(libllama_v2)
    assert needs.glibc == "2.34" and needs.glibcxx is not None and needs.cxxabi is not None
    # what it carries is not needed of the host: libggml*.so.0 lie beside libllama
    assert not any(n.startswith(("libggml", "libllama")) for n in needs.libraries)
    assert {"libc.so.6", "libstdc++.so.6"} <= set(needs.libraries)
    assert needs.files["glibc"].startswith(("libllama", "libggml")) and needs.libc == "glibc"
    assert judge(needs, detect({})).ok  # built here: it loads here


def test_measure_skips_programs_and_text_and_names_a_broken_object(libllama_v2: Path, tmp_path: Path) -> None:
    build = native_script("raise_need").copy_build(libllama_v2, tmp_path / "b")
    (build / "llama-server").write_bytes(b"\x7fELF" + bytes(100))  # a program: never loaded by us
    (build / "LICENSE").write_text("MIT\n")
    assert measure(build).glibc == "2.34"
    (build / "libggml-broken.so").write_bytes((build / "libllama.so").read_bytes()[:300])  # truncated
    with pytest.raises(ELFInvalid, match="libggml-broken.so: "):
        measure(build)


def test_a_raised_need_is_refused_by_the_loader_as_the_verdict_says(libllama_v1: Path, tmp_path: Path) -> None:
    """The same-length rename of libllama's GLIBC_2.34 need to GLIBC_2.99, its vna_hash recomputed: the
    real dynamic loader refuses it as it refuses a build made on a newer distribution, and the verdict,
    made without loading anything, names the same version and this host's glibc."""
    changed = native_script("raise_need").raise_need(libllama_v1, tmp_path / "raised")
    with pytest.raises(OSError, match="GLIBC_2.99' not found"):
        ctypes.CDLL(str(tmp_path / "raised" / "libllama.so"))
    host = detect({})
    needs = measure(tmp_path / "raised")
    assert (needs.glibc, needs.files["glibc"]) == ("2.99", changed.name)
    assert str(judge(needs, host)) == (f"{changed.name} needs GLIBC_2.99; this host has glibc {host.glibc}: this build "
                                       "was made for a newer distribution")
    ctypes.CDLL(str(libllama_v1 / "libllama.so"))  # the original still loads
    assert os.path.islink(tmp_path / "raised" / "libllama.so")  # the symlink chain is kept


def test_raise_need_refuses_what_it_cannot_do(libllama_v1: Path, tmp_path: Path) -> None:
    helper = native_script("raise_need")
    with pytest.raises(ValueError, match="differ in length"):
        helper.raise_need(libllama_v1, tmp_path / "a", new="GLIBC_2.100")
    with pytest.raises(ValueError, match="needs no GLIBC_9.99"):
        helper.raise_need(libllama_v1, tmp_path / "b", old="GLIBC_9.99", new="GLIBC_9.98")


def test_measure_walks_subfolders_and_counts_links_as_carried_names(libllama_v2: Path, tmp_path: Path) -> None:
    """Folders below the build are measured as its top (``$ORIGIN/sub`` holds objects too); a link
    to a folder is never followed; a link to a library carries its name and is not measured twice."""
    build = native_script("raise_need").copy_build(libllama_v2, tmp_path / "b")
    flat = measure(build)
    (build / "backends").mkdir()
    os.replace(build / "libllama.so", build / "backends" / "libllama.so")  # moved below: still measured
    os.symlink("backends", build / "libs")
    os.symlink("backends/libllama.so", build / "libllama.so")
    nested = measure(build)
    assert (nested.glibc, nested.glibcxx, nested.libraries) == (flat.glibc, flat.glibcxx, flat.libraries)


def test_tree_files_walks_as_os_walk_and_neither_lists_nor_follows_a_link_to_a_folder(tmp_path: Path) -> None:
    for rel in ("b/z", "a/y", "b/x", "c/deep/w"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    os.symlink("b", tmp_path / "link-to-b")
    os.symlink("nowhere", tmp_path / "dangling")
    walked = [os.path.relpath(os.path.join(top, n), tmp_path)
              for top, dirs, names in os.walk(tmp_path) if not dirs.sort() for n in sorted(names)]
    assert [os.path.relpath(e.path, tmp_path) for e in tree_files(tmp_path)] == walked
    assert walked == ["dangling", "a/y", "b/x", "b/z", "c/deep/w"]  # the link to b: not listed, not followed
