"""``runtime/declaration``: what a worker declares without its engine, for each runtime."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from superfluid.runtime import registry
from superfluid.runtime.declaration import declaration
from superfluid.runtime.hostfacts.host import detect
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.lookup import read
from superfluid.runtime.kernel.options import options_json


@pytest.mark.parametrize("runtime_id", registry.IDS)
def test_each_declaration_is_the_adapters_own(runtime_id: str, sf_home: Path) -> None:
    adapter = registry.get(runtime_id)
    assert declaration(adapter, "compat", ["--json"], read(os.environ)) == adapter.compat()
    assert declaration(adapter, "options", ["--json"], read(os.environ)) == options_json(adapter.options())
    versions = declaration(adapter, "versions", ["--json"], read(os.environ))
    assert versions == adapter.versions(detect(), [])  # nothing installed in a fresh home


@pytest.mark.parametrize("rest", [[], ["--json", "--json"], ["--yaml"]], ids=["nothing", "twice", "another"])
def test_anything_but_json_is_a_usage_error_naming_it(rest: list[str]) -> None:
    with pytest.raises(UsageError, match=r"versions takes exactly --json \(got "):
        declaration(registry.get("basert"), "versions", rest, read({}))
