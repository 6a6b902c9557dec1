"""``runtime/system``: the OS and architecture as platforms name them, as ``host.detect`` answers them."""

from __future__ import annotations

import platform

import pytest

from superfluid.runtime.hostfacts import system
from superfluid.runtime.hostfacts.host import detect


def test_the_running_system_is_platforms() -> None:
    assert system.running_os() == {"Linux": "linux", "Darwin": "macos"}.get(platform.system(), "linux")
    machine = platform.machine().lower()
    assert system.running_arch() == ("arm64" if machine in ("arm64", "aarch64") else "x64")


@pytest.mark.parametrize("environ", [{}, {"SUPERFLUID_HOST_OS": ""}, {"SUPERFLUID_HOST_OS": "macos"},
                                     {"SUPERFLUID_HOST_OS": "linux", "SUPERFLUID_HOST_ARCH": "arm64"},
                                     {"SUPERFLUID_HOST_ARCH": ""}],
                         ids=["none", "empty-os", "macos", "linux-arm64", "empty-arch"])
def test_os_and_arch_are_detects_without_the_probes(environ: dict[str, str]) -> None:
    host = detect(environ)
    assert (system.os_name(environ), system.arch_name(environ)) == (host.os, host.arch)
