"""``runtime/hostfacts/machine``: the distribution (os-release), the kernel's release and the x86-64
level, and which facts a ``SUPERFLUID_HOST_*`` variable set (issue 44, item 6): each in ``Host`` and
``doctor --json``, read under a test's root as on this machine, and the level agreeing with what this
machine's loader says it searches."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from superfluid.runtime.hostfacts.factfiles import Unread
from superfluid.runtime.hostfacts.host import detect
from superfluid.runtime.hostfacts.machine import X86_64_LEVELS, Distribution, parse_os_release, x86_64_level
from superfluid.runtime.hostfacts.overrides import TABLE, set_by
from tests import cli
from tests.runtime.fake_roots import lay_out


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param('ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n',
                 Distribution("debian", "12", "Debian GNU/Linux 12 (bookworm)"), id="debian"),
    pytest.param("NAME='Fedora Linux'\nID=fedora\nVERSION_ID=40\nPRETTY_NAME='Fedora Linux 40 (Workstation)'\n",
                 Distribution("fedora", "40", "Fedora Linux 40 (Workstation)"), id="single-quotes"),
    pytest.param('ID=arch\nPRETTY_NAME="Arch Linux"\nBUILD_ID=rolling\n', Distribution("arch", None, "Arch Linux"),
                 id="arch-no-version"),
    pytest.param('# a comment\n\nID="alpine"\nVERSION_ID=3.20.1\nPRETTY_NAME="Alpine \\"Linux\\" v3.20"\n',
                 Distribution("alpine", "3.20.1", 'Alpine "Linux" v3.20'), id="escapes"),
    pytest.param("garbage\n\x00\xff=1\n", None, id="garbage"),
    pytest.param("", None, id="empty"),
])
def test_os_release_is_read_as_a_shell_reads_it(text: str, expected: Distribution | None) -> None:
    assert parse_os_release(text) == expected


def _os_release(root: Path, where: str, text: str) -> None:
    path = root / where
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_distribution_of_a_root_etc_first_then_usr_lib(tmp_path: Path) -> None:
    root = lay_out(tmp_path / "root", "fedora")
    _os_release(root, "usr/lib/os-release", "ID=fedora\nVERSION_ID=40\n")
    assert detect({"SUPERFLUID_HOST_ROOT": str(root)}).distribution == Distribution("fedora", "40", None)
    _os_release(root, "etc/os-release", "ID=rhel\nVERSION_ID=9.4\n")
    assert detect({"SUPERFLUID_HOST_ROOT": str(root), "SUPERFLUID_HOST_MEMORY": "1G"}).distribution == \
        Distribution("rhel", "9.4", None)


def test_an_etc_os_release_refused_is_said_not_passed_over(tmp_path: Path) -> None:
    root = lay_out(tmp_path / "root", "debian")
    _os_release(root, "usr/lib/os-release", "ID=debian\n")
    (root / "etc").mkdir()
    os.mkfifo(root / "etc" / "os-release")
    h = detect({"SUPERFLUID_HOST_ROOT": str(root)})
    assert h.distribution is None and h.unread == (Unread("/etc/os-release", "distribution", "a FIFO"),)


def test_the_kernel_of_a_root_and_of_this_machine(tmp_path: Path) -> None:
    root = lay_out(tmp_path / "root", "debian")
    assert detect({"SUPERFLUID_HOST_ROOT": str(root)}).kernel is None  # not there: not known
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text("6.1.0-18-amd64\n")
    assert detect({"SUPERFLUID_HOST_ROOT": str(root), "SUPERFLUID_HOST_MEMORY": "1G"}).kernel == "6.1.0-18-amd64"
    assert detect({}).kernel == os.uname().release


def test_a_described_host_has_no_distribution_kernel_or_level() -> None:
    other = "arm64" if detect({}).arch == "x64" else "x64"
    h = detect({"SUPERFLUID_HOST_ARCH": other})
    assert (h.distribution, h.kernel, h.x86_64_level) == (None, None, None)


_V2 = "cx16 lahf_lm popcnt pni sse4_1 sse4_2 ssse3"
_V3 = "avx avx2 bmi1 bmi2 f16c fma abm movbe xsave"
_V4 = "avx512f avx512bw avx512cd avx512dq avx512vl"


@pytest.mark.parametrize(("flags", "level"), [
    pytest.param("fpu sse sse2", "v1", id="v1"),
    pytest.param(_V2, "v2", id="v2"),
    pytest.param(f"{_V2} {_V3}", "v3", id="v3"),
    pytest.param(f"{_V2} {_V3} {_V4}", "v4", id="v4"),
    pytest.param(f"{_V2} {_V4}", "v2", id="v4-features-without-v3"),
    pytest.param(f"{_V2} {_V3.replace('movbe', '')} {_V4}", "v2", id="one-v3-feature-missing"),
])
def test_the_x86_64_level_is_the_highest_whose_features_and_those_below_are_all_there(flags: str, level: str) -> None:
    assert x86_64_level(flags.split()) == level


def _cpuinfo(flags: str) -> str:
    return f"processor\t: 0\nflags\t\t: {flags}\n\nprocessor\t: 1\nflags\t\t: {flags}\n"


def test_the_level_of_a_root_s_cpu(tmp_path: Path) -> None:
    root = lay_out(tmp_path / "root", "debian")
    (root / "proc" / "cpuinfo").write_text(_cpuinfo(f"fpu {_V2} {_V3}"))
    h = detect({"SUPERFLUID_HOST_ROOT": str(root)})
    assert (h.x86_64_level, h.cpu_features) == ("v3", ("avx", "avx2", "f16c", "fma"))
    assert detect({"SUPERFLUID_HOST_ROOT": str(root), "SUPERFLUID_HOST_CPU_FEATURES": "avx"}).x86_64_level is None
    arm = lay_out(tmp_path / "arm", "debian", arch="arm64")
    assert detect({"SUPERFLUID_HOST_ROOT": str(arm), "SUPERFLUID_HOST_ARCH": "arm64"}).x86_64_level is None


def test_the_level_is_what_this_machine_s_loader_searches() -> None:
    """``ld.so --help`` lists the glibc-hwcaps subfolders, ``x86-64-v3 (supported, searched)``: the
    highest it supports is the level read from /proc/cpuinfo."""
    loader = "/lib64/ld-linux-x86-64.so.2"
    if detect({}).arch != "x64" or not os.path.exists(loader):
        pytest.skip("an x86-64 glibc host")
    text = subprocess.run([loader, "--help"], capture_output=True, text=True, timeout=30, check=False).stdout
    supported = re.findall(r"^\s+x86-64-(v\d) \(supported, searched\)$", text, re.MULTILINE)
    if not supported and "glibc-hwcaps" not in text:
        pytest.skip("a glibc that lists its glibc-hwcaps levels (2.33 and later)")
    assert detect({}).x86_64_level == max(supported, default="v1")
    assert [name for name, _ in X86_64_LEVELS] == ["v2", "v3", "v4"]


def test_set_by_names_the_variable_of_each_fact_it_set() -> None:
    h = detect({"SUPERFLUID_HOST_NVIDIA_DRIVER": "580.95.05", "SUPERFLUID_HOST_CUDA_RUNTIME_VERSION": "12.4",
                "SUPERFLUID_HOST_ROCM": "no", "SUPERFLUID_HOST_ROCM_VERSION": "none", "SUPERFLUID_HOST_GLIBC": "",
                "SUPERFLUID_HOST_MEMORY": "64G"})
    assert h.to_json()["set_by"] == {
        "nvidia_driver": "SUPERFLUID_HOST_NVIDIA_DRIVER",
        "cuda_runtime_version": "SUPERFLUID_HOST_CUDA_RUNTIME_VERSION",
        "cuda_runtime": "SUPERFLUID_HOST_CUDA_RUNTIME_VERSION",  # a version implies its runtime
        "rocm": "SUPERFLUID_HOST_ROCM",  # its own variable before the version's
        "rocm_version": "SUPERFLUID_HOST_ROCM_VERSION", "memory": "SUPERFLUID_HOST_MEMORY"}  # empty: unset
    assert detect({}).to_json()["set_by"] == {}


def test_every_variable_but_the_root_sets_facts_of_the_report() -> None:
    keys = set(detect({}).to_json())
    for name, override in TABLE.items():
        assert set(override.sets) <= keys, name
        assert bool(override.sets) is (name != "SUPERFLUID_HOST_ROOT"), name
    assert set_by({"SUPERFLUID_HOST_ROOT": "/"}) == {}


def test_doctor_json_holds_the_new_facts(tmp_path: Path) -> None:
    """Through the real command line: the distribution, kernel and level of a root, which facts a
    variable set, and (item 1) the fact files refused."""
    root = lay_out(tmp_path / "root", "debian")
    _os_release(root, "etc/os-release", 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n')
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text("6.1.0-18-amd64\n")
    (root / "proc" / "cpuinfo").write_text(_cpuinfo(f"{_V2} {_V3} {_V4}"))
    env = cli.environment(tmp_path / "home", SUPERFLUID_HOST_ROOT=str(root), SUPERFLUID_HOST_VULKAN="yes")
    host = cli.run("superfluid", "doctor", "--json", env=env).json()["host"]
    assert host["distribution"] == {"id": "debian", "version_id": "12", "pretty_name": "Debian GNU/Linux 12 (bookworm)"}
    assert (host["kernel"], host["x86_64_level"], host["unread"]) == ("6.1.0-18-amd64", "v4", [])
    assert host["set_by"] == {"vulkan": "SUPERFLUID_HOST_VULKAN"}
