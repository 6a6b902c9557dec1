"""Declarations and option checks against the real reference baseRT engine (built by tests/engines)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.basert.basert_helpers import lib_path
from tests.declarations.conftest import base_env, sf, sf_json, validate


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
    assert ok.code == 0 and ok.stdout.startswith("basert: available (0.4.0"), ok.stderr
    refused = sf(env, "runtime", "check", "basert", "--lib", str(lib_path(engines, "0.5.0")), "--json")
    assert refused.code == 1
    assert json.loads(refused.stdout)["available"].startswith(
        f"libbaseRT at {lib_path(engines, '0.5.0')} states ABI 2; this superfluid drives ABI 1")
    bad = sf(env, "runtime", "check", "basert", "--kv-bits", "3")
    assert bad.code == 2 and "--kv-bits '3': expected one of 0, 4, 8, 16, 84" in bad.stderr
