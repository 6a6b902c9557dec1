"""The running system as platforms name it (``linux``/``macos``, ``x64``/``arm64``), without the host's probes.

See docs/cli.md, "Environment".
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from superfluid.runtime.hostfacts.overrides import stated

# host.detect starts from these and then probes the rest (the loader's cache, every library
# folder, the GPUs); a worker's check that only names its devices' backend reads this module alone,
# without those probes or their imports. Each is overridden by its SUPERFLUID_HOST_* variable.

__all__ = ["os_name", "arch_name", "host_platform", "running_os", "running_arch"]


def running_os() -> str:
    """This machine's operating system: ``"macos"`` or ``"linux"`` (``platform.system()``, read cheaply)."""
    return "macos" if os.uname().sysname == "Darwin" else "linux"


def running_arch() -> str:
    """This machine's architecture: ``"arm64"`` or ``"x64"`` (``platform.machine()``, read cheaply)."""
    machine = os.uname().machine.lower()
    return "arm64" if machine in ("arm64", "aarch64") else "x64"


def os_name(overrides: Mapping[str, str] | None = None) -> str:
    """The host's operating system as ``host.detect`` answers it: ``SUPERFLUID_HOST_OS`` of the host-fact
    ``overrides`` (``kernel.lookup.Lookup.host``; None: this process's environment, read here, the
    host-facts reader), else (empty too) this machine's.

    Raises:
        UsageError: it is neither ``linux`` nor ``macos`` (``hostfacts.overrides``).
    """
    given, value = stated(os.environ if overrides is None else overrides, "SUPERFLUID_HOST_OS")
    return value if given else running_os()


def arch_name(overrides: Mapping[str, str] | None = None) -> str:
    """The host's architecture as ``host.detect`` answers it: ``SUPERFLUID_HOST_ARCH`` of the host-fact
    ``overrides`` (as ``os_name``), else (empty too) this machine's.

    Raises:
        UsageError: it is neither ``x64`` nor ``arm64`` (``hostfacts.overrides``).
    """
    given, value = stated(os.environ if overrides is None else overrides, "SUPERFLUID_HOST_ARCH")
    return value if given else running_arch()


def host_platform(overrides: Mapping[str, str]) -> str:
    """This host's platform as receipts record it (``linux-x64``): ``os_name`` and ``arch_name`` of
    the host-fact ``overrides`` (a face's environment, or a ``Lookup``'s ``host``)."""
    return f"{os_name(overrides)}-{arch_name(overrides)}"
