"""``runtime/kernel/lookup``: the environment read once at a process's face into the record the runtimes take."""

from __future__ import annotations

import os

import pytest

from superfluid.runtime.kernel.layout import home
from superfluid.runtime.kernel.lookup import is_host_variable, read


def test_the_home_is_layouts_reading_of_it() -> None:
    assert read({"SUPERFLUID_HOME": "rel/h"}).home == os.path.abspath("rel/h") == home({"SUPERFLUID_HOME": "rel/h"})
    assert read({"HOME": "/u", "SUPERFLUID_HOME": ""}).home == "/u/.superfluid"


def test_the_host_overrides_are_the_host_variables_and_the_loaders_path() -> None:
    got = read({"SUPERFLUID_HOST_OS": "macos", "LD_LIBRARY_PATH": "/l", "SUPERFLUID_HOME": "/h", "PATH": "/bin"})
    assert dict(got.host) == {"SUPERFLUID_HOST_OS": "macos", "LD_LIBRARY_PATH": "/l"}


@pytest.mark.parametrize(("environ", "want"), [
    pytest.param({"BASERT_LIB": "/x"}, "/x", id="set"),
    pytest.param({"BASERT_LIB": ""}, None, id="empty-is-unset"),
    pytest.param({}, None, id="unset"),
])
def test_a_variable(environ: dict[str, str], want: str | None) -> None:
    assert read(environ).variable("BASERT_LIB") == want


def test_it_is_a_copy_read_once() -> None:
    environ = {"BASERT_LIB": "/x", "SUPERFLUID_HOST_OS": "linux"}
    got = read(environ)
    environ["BASERT_LIB"] = "/y"
    environ["SUPERFLUID_HOST_OS"] = "macos"
    assert got.variable("BASERT_LIB") == "/x" and got.host["SUPERFLUID_HOST_OS"] == "linux"
    with pytest.raises(TypeError):
        got.variables["BASERT_LIB"] = "/z"  # type: ignore[index]


@pytest.mark.parametrize(("name", "host"), [("SUPERFLUID_HOST_OS", True), ("SUPERFLUID_HOST_GLIBC", True),
                                            ("LD_LIBRARY_PATH", True), ("SUPERFLUID_HOME", False),
                                            ("HOST", False), ("LD_PRELOAD", False)])
def test_the_host_facts_variables(name: str, host: bool) -> None:
    assert is_host_variable(name) is host
