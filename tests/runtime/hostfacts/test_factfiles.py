"""Host facts never hang on a FIFO or an endless file (issue 44, item 1): every file they read goes
through ``kernel.jsonread``'s ``open_regular``/``read_head`` (a regular file, opened without blocking,
read up to a cap), and
``doctor``, ``doctor --json`` and ``runtimes --json`` answer on a fake root whose fact files are FIFOs
or links to ``/dev/zero``, each within the 10 s a user waits. A fact file refused is said (issue 44,
item 1): ``Host.unread`` (``doctor --json``'s ``host.unread``) names each, the fact it would have
given and why; a file that is not there is no refusal."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from superfluid.runtime.hostfacts import elf
from superfluid.runtime.hostfacts.factfiles import Unread
from superfluid.runtime.hostfacts.host import detect
from superfluid.runtime.kernel.jsonread import NotRegularFile, open_regular, read_head
from tests import cli
from tests.runtime.fake_roots import X64, lay_out, ld_cache

#: the fact files of a root, as the host facts find them
FACT_FILES = ("proc/cpuinfo", "proc/driver/nvidia/version", "opt/rocm/.info/version",
              "sys/class/kfd/kfd/topology/nodes/1/properties", "usr/lib/x86_64-linux-gnu/libc.so.6",
              "usr/lib/x86_64-linux-gnu/libstdc++.so.6", "etc/os-release", "etc/ld.so.cache",
              "proc/sys/kernel/osrelease")
#: each fact file: the path the host sees it at (a library as the loader finds it: Debian's loader
#: searches /lib/<triplet> first, which links to /usr/lib/<triplet>) and the facts it gives
FACTS = {"proc/cpuinfo": ("/proc/cpuinfo", "cpu_features, x86_64_level"),
         "proc/driver/nvidia/version": ("/proc/driver/nvidia/version", "nvidia_driver"),
         "opt/rocm/.info/version": ("/opt/rocm/.info/version", "rocm_version"),
         "sys/class/kfd/kfd/topology/nodes/1/properties": ("/sys/class/kfd/kfd/topology/nodes/1/properties",
                                                           "rocm_gfx"),
         "usr/lib/x86_64-linux-gnu/libc.so.6": ("/lib/x86_64-linux-gnu/libc.so.6", "glibc"),
         "usr/lib/x86_64-linux-gnu/libstdc++.so.6": ("/lib/x86_64-linux-gnu/libstdc++.so.6", "glibcxx, cxxabi"),
         "etc/os-release": ("/etc/os-release", "distribution"),
         "etc/ld.so.cache": ("/etc/ld.so.cache", "library_dirs, libraries"),
         "proc/sys/kernel/osrelease": ("/proc/sys/kernel/osrelease", "kernel")}


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _zero(path: Path) -> None:
    os.symlink("/dev/zero", path)


def _replaced(root: Path, name: str, make: Callable[[Path], None]) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    make(path)


def test_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(NotRegularFile, match="is a FIFO, not a regular file"):
        open_regular(tmp_path / "fifo")
    assert elf.is_elf(tmp_path / "fifo") is False


def test_a_link_to_dev_zero_is_refused_not_read_for_ever(tmp_path: Path) -> None:
    os.symlink("/dev/zero", tmp_path / "zero")
    with pytest.raises(NotRegularFile, match="character device"):
        read_head(tmp_path / "zero", 100)
    with pytest.raises(elf.ELFInvalid, match="character device"):
        elf.read(tmp_path / "zero")


def test_a_long_file_is_read_to_its_head_only(tmp_path: Path) -> None:
    (tmp_path / "long").write_bytes(b"x" * 10_000)
    assert read_head(tmp_path / "long", 100) == b"x" * 100
    with pytest.raises(FileNotFoundError):
        read_head(tmp_path / "missing", 100)


@pytest.mark.parametrize(("make", "why"), [(_fifo, "a FIFO"), (_zero, "a character device")], ids=["fifo", "dev-zero"])
@pytest.mark.parametrize("name", FACT_FILES)
def test_the_host_facts_answer_on_a_hostile_root(tmp_path: Path, name: str, make: Callable[[Path], None],
                                                 why: str) -> None:
    root = lay_out(tmp_path / "root", "debian")
    _replaced(root, name, make)
    env = cli.environment(tmp_path / "home", SUPERFLUID_HOST_ROOT=str(root))
    for argv in (("doctor", "--json"), ("runtimes", "--json")):
        began = time.monotonic()
        run = cli.run("superfluid", *argv, env=env, timeout=20)
        assert time.monotonic() - began < 10, argv
        assert "Traceback" not in run.stderr and run.code in (0, 1), (argv, run.code, run.stderr)
        doc = run.json()  # an answer, not a hang or a crash
        if argv[0] == "doctor":  # and the file refused, named, with the fact it would have given and why
            path, fact = FACTS[name]
            assert doc["host"]["unread"] == [{"path": path, "fact": fact, "why": why}]


def _sparse(path: Path) -> None:
    with path.open("wb") as f:
        f.truncate(17 << 20)  # 17 MiB of nothing: past the cache's cap of 16 MiB


#: hostile fact files beyond FIFOs and /dev/zero: (file, how it is made, why it is refused)
HOSTILE: list[tuple[str, Callable[[Path], None], str]] = [
    ("etc/os-release", lambda p: p.write_bytes(b"ID=x\n" * 20000), "larger than 65536 bytes (100000)"),
    ("etc/ld.so.cache", _sparse, f"larger than {16 << 20} bytes ({17 << 20})"),
    ("proc/cpuinfo", lambda p: p.mkdir(), "a directory"),
    ("etc/os-release", lambda p: os.symlink("os-release", p), "not readable: Too many levels of symbolic links"),
    ("usr/lib/x86_64-linux-gnu/libc.so.6", lambda p: p.write_bytes(b"not an ELF file, but some text"),
     "bad magic b'not ': not an ELF object"),
]


@pytest.mark.parametrize(("name", "make", "why"), HOSTILE,
                         ids=["oversize-os-release", "oversize-cache", "directory", "link-loop", "not-elf"])
def test_each_refusal_says_why(tmp_path: Path, name: str, make: Callable[[Path], None], why: str) -> None:
    root = lay_out(tmp_path / "root", "debian")
    _replaced(root, name, make)
    path, fact = FACTS[name]
    assert detect({"SUPERFLUID_HOST_ROOT": str(root)}).unread == (Unread(path, fact, why),)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 000")
def test_a_file_that_cannot_be_opened_says_the_system_s_words(tmp_path: Path) -> None:
    root = lay_out(tmp_path / "root", "debian")
    _replaced(root, "proc/driver/nvidia/version", lambda p: p.write_text("NVRM version: 580.95.05\n"))
    (root / "proc/driver/nvidia/version").chmod(0)
    unread = detect({"SUPERFLUID_HOST_ROOT": str(root)}).unread
    assert unread == (Unread("/proc/driver/nvidia/version", "nvidia_driver", "not readable: Permission denied"),)


def test_a_file_that_is_not_there_is_no_refusal(tmp_path: Path) -> None:
    """A root with no driver, no ROCm, no os-release, no cache: nothing refused, each fact not known."""
    root = lay_out(tmp_path / "root", "debian")
    (root / "etc").mkdir()
    os.symlink("/nonexistent/os-release", root / "etc" / "os-release")  # a dangling link: nothing there
    h = detect({"SUPERFLUID_HOST_ROOT": str(root)})
    assert h.unread == () and (h.nvidia_driver, h.rocm_version, h.distribution, h.kernel) == (None, None, None, None)


def test_doctor_names_every_refused_file_in_time(tmp_path: Path) -> None:
    """Every hostile fact file at once, on the real command line: ``doctor --json`` answers within
    10 s and lists each, ordered by path, with the fact it would have given and why."""
    root = lay_out(tmp_path / "root", "debian")
    for name in FACT_FILES:
        _replaced(root, name, _fifo if "proc/" in name or "rocm" in name else _zero)
    env = cli.environment(tmp_path / "home", SUPERFLUID_HOST_ROOT=str(root))
    began = time.monotonic()
    run = cli.run("superfluid", "doctor", "--json", env=env, timeout=20)
    assert time.monotonic() - began < 10 and run.code in (0, 1), run.stderr
    expected = [{"path": FACTS[n][0], "fact": FACTS[n][1], "why": "a FIFO" if "proc/" in n or "rocm" in n
                 else "a character device"} for n in FACT_FILES]
    assert run.json()["host"]["unread"] == sorted(expected, key=lambda u: u["path"])


def test_a_good_root_reads_every_fact_file(tmp_path: Path) -> None:
    """The same files, well formed: each fact known, nothing unread."""
    root = lay_out(tmp_path / "root", "debian")
    (root / "etc").mkdir()
    (root / "etc" / "os-release").write_text('ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12"\n')
    (root / "etc" / "ld.so.cache").write_bytes(ld_cache([("libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1", X64)]))
    (root / "proc" / "sys" / "kernel").mkdir(parents=True)
    (root / "proc" / "sys" / "kernel" / "osrelease").write_text("6.1.0-18-amd64\n")
    h = detect({"SUPERFLUID_HOST_ROOT": str(root)})
    assert h.unread == () and h.kernel == "6.1.0-18-amd64" and h.distribution is not None
    assert h.distribution.to_json() == {"id": "debian", "version_id": "12", "pretty_name": "Debian GNU/Linux 12"}
    assert h.found("libz.so.1") == "/usr/lib/x86_64-linux-gnu/libz.so.1"
