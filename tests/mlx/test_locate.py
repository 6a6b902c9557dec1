"""``runtime/mlx/locate``: where the MLX environment is looked for (in order, and every place looked), and
why MLX cannot run here — from file lookups alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from superfluid.runtime.hostfacts.host import Host
from superfluid.runtime.kernel.lookup import read
from superfluid.runtime.mlx.locate import environment, find_venv, not_here
from tests.mlx.environments import MAC, venv

PLATFORMS = ["macos-arm64"]


@pytest.mark.parametrize(("host", "refused"), [
    pytest.param(Host(os="macos", arch="arm64"), False, id="apple-silicon"),
    pytest.param(Host(os="macos", arch="x64"), True, id="intel-mac"),
    pytest.param(Host(os="linux", arch="arm64"), True, id="linux-arm64"),
])
def test_not_here(host: Host, refused: bool) -> None:
    why = not_here(host, PLATFORMS)
    assert (why is not None) is refused
    if why is not None:
        assert why.startswith("MLX runs on Apple silicon only (macos-arm64)")


def test_find_venv_order_and_what_was_looked_at(tmp_path: Path) -> None:
    flag, var, active = venv(tmp_path / "flag", "{}"), venv(tmp_path / "var", "{}"), venv(tmp_path / "act", "{}")
    env = read({"SUPERFLUID_MLX_VENV": str(var), "VIRTUAL_ENV": str(active)})
    worker = str(tmp_path / "elsewhere" / "bin" / "superfluid-worker-mlx")
    assert find_venv({"venv": str(flag)}, env, worker) == (str(flag), [str(flag), str(var), str(active)])
    assert find_venv({}, env, worker) == (str(var), [str(var), str(active)])
    assert find_venv({"venv": str(tmp_path / "none")}, read({"VIRTUAL_ENV": str(active)}), worker) == (
        str(active), [str(tmp_path / "none"), str(active)])
    assert find_venv({}, read({}), worker) == (None, [])


def test_an_installs_own_env_is_used_only_beside_its_receipt(tmp_path: Path) -> None:
    install = tmp_path / "runtimes" / "mlx" / "0.29.3-metal"
    venv(install / "env", "{}")
    worker = str(install / "bin" / "superfluid-worker-mlx")
    assert find_venv({}, read({}), worker) == (None, [])  # no receipt: not an install
    (install / "runtime.json").write_text("{}")
    assert find_venv({}, read({}), worker) == (str(install / "env"), [str(install / "env")])


def test_environment_says_why_there_is_none(tmp_path: Path) -> None:
    assert environment({}, read({"SUPERFLUID_HOST_OS": "linux", "SUPERFLUID_HOST_ARCH": "x64"}), PLATFORMS) == (
        None, "MLX runs on Apple silicon only (macos-arm64); this is Linux x64")
    none, why = environment({}, read(MAC), PLATFORMS, str(tmp_path / "bin" / "w"))
    assert none is None and why == ("the mlx runtime is not installed: no MLX environment here (looked at: no --venv, "
                                    "no install, no SUPERFLUID_MLX_VENV or VIRTUAL_ENV): install the mlx runtime, "
                                    "or name an environment with --mlx-venv")
    _, why = environment({"venv": str(tmp_path / "gone")}, read(MAC), PLATFORMS, str(tmp_path / "bin" / "w"))
    assert f"(looked at: {tmp_path / 'gone'})" in why
