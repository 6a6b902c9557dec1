"""``runtime/mlx/adapter``: its declarations from the recipe alone (pinned wheels and Python, compat,
versions on Apple silicon and elsewhere, options)."""

from __future__ import annotations

from pathlib import Path

import pytest

from superfluid.runtime.hostfacts.host import Host
from superfluid.runtime.kernel.lookup import read
from superfluid.runtime.mlx.adapter import ADAPTER as MLX
from superfluid.runtime.planning import NotInstallable, Request
from tests.declarations.conftest import LINUX_X64 as ENV_LINUX_X64
from tests.declarations.conftest import MACOS_ARM64 as ENV_MACOS_ARM64
from tests.declarations.conftest import empty_home_env, fake_worker
from tests.declarations.conftest import version_rows as _rows

LINUX_X64 = Host(os="linux", arch="x64")
MACOS_ARM64 = Host(os="macos", arch="arm64")


def test_mlx_recipe_pins_every_wheel_and_the_python() -> None:
    tested = MLX.recipe["tested"][0]
    wheels = {w["name"]: w for w in tested["wheels"]}
    assert (tested["version"], tested["mlx_lm"]) == ("0.32.2", "0.31.3")
    assert wheels["mlx"]["sha256"] == "77217798a2b036bae9f213b851d4cde4581893787c9964458b7d471f86036bd6"
    assert wheels["mlx-lm"]["file"] == "mlx_lm-0.31.3-py3-none-any.whl"
    assert all(len(w["sha256"]) == 64 for w in tested["wheels"])
    assert MLX.recipe["python"]["version"] == "3.12.14"
    assert MLX.recipe["python"]["assets"]["macos-arm64"]["sha256"] == \
        "1bb3e53d231ee2c8881e8daf6426f4dd95bff0dda496af0f3af300357aa998d0"


def test_mlx_compat_and_versions() -> None:
    assert MLX.compat()["installs"] == [{"mlx": "0.32.2", "mlx_lm": "0.31.3", "python": "3.12"}]
    assert MLX.compat()["platforms"] == ["macos-arm64"]
    here = _rows(MLX.versions(LINUX_X64, []))["0.32.2"]
    assert here["install"] is None and here["installs"].startswith("MLX runs on Apple silicon only")
    mac = _rows(MLX.versions(MACOS_ARM64, ["0.32.2-metal"]))["0.32.2"]
    assert (mac["installs"], mac["install"], mac["installed"], mac["digest"]) == (True, "0.32.2-metal", True, "pinned")
    assert [o.name for o in MLX.options()] == ["venv", "prefill-chunk", "cache-limit-mb"]


# -- where it installs, and how the manifest and the face show it -----------------------------------

@pytest.mark.parametrize(("host", "fragment"), [
    pytest.param(LINUX_X64, "nothing of mlx installs here", id="elsewhere"),
    pytest.param(MACOS_ARM64, "not done by this toolchain", id="apple-silicon-not-yet"),
])
def test_it_plans_nothing(host: Host, fragment: str) -> None:
    with pytest.raises(NotInstallable, match=fragment) as e:
        MLX.plan(Request(id="mlx"), host)
    assert e.value.fixes or e.value.advice


def test_the_python_line_is_the_recipes_major_minor() -> None:
    assert MLX.python == MLX.recipe["python"]["version"]
    assert MLX.python_line == ".".join(MLX.python.split(".")[:2])
    assert MLX.compat()["installs"][0]["python"] == MLX.python_line


def test_mlx_nothing_to_load(home: Path, tmp_path: Path) -> None:
    worker = str(tmp_path / "bin" / "superfluid-worker-mlx")
    linux = MLX.nothing_to_load(read(empty_home_env(home, ENV_LINUX_X64)), worker)
    assert linux is not None and linux.message == "MLX runs on Apple silicon only (macos-arm64); this is Linux x64"
    mac = empty_home_env(home, ENV_MACOS_ARM64)
    why = MLX.nothing_to_load(read(mac), worker)
    assert why is not None and why.message.startswith("the mlx runtime is not installed: no MLX environment here")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    fake_worker(venv / "bin" / "python", "")
    assert MLX.nothing_to_load(read(dict(mac, SUPERFLUID_MLX_VENV=str(venv))), worker) is None
