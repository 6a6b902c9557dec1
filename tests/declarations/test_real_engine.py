"""Declarations and option checks against the real reference baseRT engine (built by tests/engines)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.basert.basert_helpers import build_engines, lib_path, native_cache
from tests.declarations.conftest import base_env, sf, sf_json, validate


@pytest.fixture(scope="module")
def engines() -> Path:
    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.fail("no C compiler (cc): the reference engine cannot be built")
    done = build_engines(native_cache())
    assert done.returncode == 0, done.stdout + done.stderr
    return native_cache() / "basert"


def test_runtimes_json_with_a_ready_basert(home: Path, engines: Path) -> None:
    rows = {r["id"]: r for r in sf_json(base_env(home, BASERT_LIB=str(lib_path(engines, "0.4.0"))),
                                        "runtimes", "--json")}
    validate(list(rows.values()), "runtimes")
    basert = rows["basert"]
    assert (basert["state"], basert["ready"], basert["abi"]) == ("ready", True, 1)
    assert basert["version"] == "0.4.0" and basert["worker"]["source"] == "linked"
    unnumbered = {r["id"]: r for r in sf_json(base_env(home, BASERT_LIB=str(lib_path(engines, "0.3.0"))),
                                              "runtimes", "--json")}["basert"]
    assert (unnumbered["state"], unnumbered["abi"]) == ("ready", None)


def test_runtime_check_basert_with_options(home: Path, engines: Path) -> None:
    env = base_env(home)
    ok = sf(env, "runtime", "check", "basert", "--lib", str(lib_path(engines, "0.4.0")), "--kv-bits", "8")
    assert ok.returncode == 0 and ok.stdout.startswith("basert: available (0.4.0"), ok.stderr
    refused = sf(env, "runtime", "check", "basert", "--lib", str(lib_path(engines, "0.5.0")), "--json")
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["available"].startswith(
        f"libbaseRT at {lib_path(engines, '0.5.0')} states ABI 2; this superfluid drives ABI 1")
    bad = sf(env, "runtime", "check", "basert", "--kv-bits", "3")
    assert bad.returncode == 2 and "--kv-bits '3': expected one of 0, 4, 8, 16, 84" in bad.stderr
