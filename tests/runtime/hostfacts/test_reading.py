"""Host facts never hang on a FIFO or an endless file (issue 44, item 1): every file they read goes
through ``kernel.jsonread``'s ``open_regular``/``read_head`` (a regular file, opened without blocking,
read up to a cap), and
``doctor``, ``doctor --json`` and ``runtimes --json`` answer on a fake root whose fact files are FIFOs
or links to ``/dev/zero``, each within the 10 s a user waits."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from superfluid.runtime.hostfacts import elf
from superfluid.runtime.kernel.jsonread import NotRegularFile, open_regular, read_head
from tests import cli
from tests.runtime.fake_roots import lay_out

#: the fact files of a root, as the host facts find them
FACT_FILES = ("proc/cpuinfo", "proc/driver/nvidia/version", "opt/rocm/.info/version",
              "sys/class/kfd/kfd/topology/nodes/1/properties", "usr/lib/x86_64-linux-gnu/libc.so.6",
              "usr/lib/x86_64-linux-gnu/libstdc++.so.6")


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


@pytest.mark.parametrize("make", [_fifo, _zero], ids=["fifo", "dev-zero"])
@pytest.mark.parametrize("name", FACT_FILES)
def test_the_host_facts_answer_on_a_hostile_root(tmp_path: Path, name: str, make: Callable[[Path], None]) -> None:
    root = lay_out(tmp_path / "root", "debian")
    _replaced(root, name, make)
    env = cli.environment(tmp_path / "home", SUPERFLUID_HOST_ROOT=str(root))
    for argv in (("doctor", "--json"), ("runtimes", "--json")):
        began = time.monotonic()
        run = cli.run("superfluid", *argv, env=env, timeout=20)
        assert time.monotonic() - began < 10, argv
        assert "Traceback" not in run.stderr and run.code in (0, 1), (argv, run.code, run.stderr)
        run.json()  # an answer, not a hang or a crash
