"""``runtime.installs``: the installs of a runtime as they are on disk, read-only: the names a
runtime id and an install may have, the installs there in default order, the broken ones listed
but never the default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from superfluid.installer.home import installs
from superfluid.installer.home.installs import BadName, check_install_name, check_runtime_id, list_installs, refusal
from tests.installer.staged import do_install, receipt, root_of

# --- names and order (pure) -----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["basert", "llamacpp", "mlx", "a.b-c_d", "0x"])
def test_runtime_ids_accepted(name: str) -> None:
    assert check_runtime_id(name) == name


@pytest.mark.parametrize("name", ["", "Basert", "../x", "a/b", ".hidden", "-x", "a b", "basert@0.4.0-cpu"])
def test_runtime_ids_refused(name: str) -> None:
    with pytest.raises(BadName, match="is not a runtime id"):
        check_runtime_id(name)


@pytest.mark.parametrize("name", ["0.4.0-cpu", "b11284-cuda-13.4", "custom-vulkan", "1.0+local", "x_y"])
def test_install_names_accepted(name: str) -> None:
    assert check_install_name(name) == name


@pytest.mark.parametrize("name", ["", ".staging", "..", "a/b", "../x", "current", "pinned", "a b", "é", "x\n"])
def test_install_names_refused(name: str) -> None:
    with pytest.raises(BadName, match="is not an install name"):
        check_install_name(name)


def test_broken_installs_listed_but_never_default(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = root_of(home)
    do_install(home, "1.0-cpu")
    (root / "9.0-metal" / "lib").mkdir(parents=True)  # no receipt
    (root / "8.0-metal").mkdir()
    (root / "8.0-metal" / "runtime.json").write_text(json.dumps(receipt("1.0-cpu").to_json()))  # another's
    (root / "7.0-metal").mkdir()
    (root / "7.0-metal" / "runtime.json").write_text("{not json")
    found = {i.name: i for i in list_installs(root)}
    assert found["1.0-cpu"].ok
    assert "does not exist" in (found["9.0-metal"].problem or "")
    assert "describes the install '1.0-cpu', not '8.0-metal'" in (found["8.0-metal"].problem or "")
    assert "not valid JSON at line 1" in (found["7.0-metal"].problem or "")
    assert [i.name for i in list_installs(root)][0] == "1.0-cpu"
    assert installs.default_install(root) == "1.0-cpu"


# --- stale leftovers ------------------------------------------------------------------------------------
    assert refusal(found["9.0-metal"]) == ("broken", found["9.0-metal"].problem) and refusal(found["1.0-cpu"]) is None
