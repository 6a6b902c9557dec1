"""``runtime versions`` and ``runtime install --dry-run`` agree about what installs here (issue 25.2): with a
listing named (``--mirror``, ``SUPERFLUID_MIRROR``, ``--offline``) both choose by the same plan; without one,
``versions`` says it lists the recipe's pins only and names the command that asks the listing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from superfluid.declarations import with_listing
from tests.declarations.conftest import base_env, sf, sf_json, validate
from tests.end_to_end import releases
from tests.release_server import ReleaseServer


def _dry_run(env: dict[str, str], *flags: str) -> dict[str, object]:
    plans = sf_json(env, "runtime", "install", "basert", "--dry-run", "--json", *flags)["plans"]
    assert plans, "the dry run plans something"
    return plans[0]  # type: ignore[no-any-return]


@pytest.mark.parametrize("named", ["flag", "environment"])
def test_with_a_mirror_versions_marks_what_install_chooses(home: Path, mirror: Path, named: str) -> None:
    env = base_env(home, **({"SUPERFLUID_MIRROR": str(mirror)} if named == "environment" else {}))
    flags = ("--mirror", str(mirror)) if named == "flag" else ()
    chosen = _dry_run(env, *flags)
    rows = sf_json(env, "runtime", "versions", "basert", "--json", *flags)
    validate(rows, "versions")
    marked = [r for r in rows if r.get("source") == "listing"]
    assert [(r["version"], r["install"], r["installs"]) for r in marked] == [
        (chosen["version"], chosen["install"], True)]
    text = sf(env, "runtime", "versions", "basert", *flags).stdout
    hint = f"superfluid runtime install basert{' --mirror ' + str(mirror) if named == 'flag' else ''}"
    assert f"`{hint}` installs {chosen['version']} as {chosen['install']}" in text  # the hint keeps --mirror
    assert "none installs here" not in text and "none of the recipe's pins" not in text


def test_without_a_listing_versions_says_it_lists_pins_only(home: Path, mirror: Path) -> None:
    with ReleaseServer() as server:  # install would read GitHub's listing: here a loopback one
        releases.publish(server)
        env = base_env(home, SUPERFLUID_GITHUB_API=server.url)
        chosen = _dry_run(env)
        server.clear_log()
        done = sf(env, "runtime", "versions", "basert")
        assert server.log == []  # the recipe alone: no request
    assert done.code == 0, done.stderr
    rows = sf_json(env, "runtime", "versions", "basert", "--json")
    assert all(r["installs"] is not True for r in rows)  # on Linux x64 no pin installs: the recipe alone
    assert chosen["install"] == "0.4.0-cpu"  # while the listing offers one by ABI number
    assert "none of the recipe's pins installs here" in done.stdout
    assert "the release listing may offer more here" in done.stdout
    assert "`superfluid runtime install basert --dry-run` asks the release listing" in done.stdout
    assert "\nnone installs here" not in done.stdout


def test_offline_versions_and_the_offline_dry_run_agree(home: Path, mirror: Path) -> None:
    env = base_env(home)
    assert sf(env, "runtime", "install", "basert", "--mirror", str(mirror)).code == 0
    dry = sf(env, "runtime", "install", "basert", "--dry-run", "--json", "--offline", "--mirror", str(mirror))
    versions = sf(env, "runtime", "versions", "basert", "--json", "--offline", "--mirror", str(mirror))
    assert (versions.code, dry.code) == (0, 0), versions.stderr + dry.stderr
    chosen = json.loads(dry.stdout)["plans"][0]
    (row,) = [r for r in json.loads(versions.stdout) if r.get("source") == "listing"]
    assert (row["version"], row["install"], row["installed"]) == (chosen["version"], chosen["install"], True)


@pytest.mark.parametrize("offline", [False, True], ids=["mirror", "offline"])
def test_every_version_installs_as_versions_says(home: Path, mirror: Path, offline: bool) -> None:
    """Issue 35, item 5: with a listing, each version ``versions`` lists installs here exactly when
    ``install --version V --dry-run`` plans it, as the same install (0.3.0 was said not to install
    on Linux x64, from the recipe's pins, while the listing's linux-x64 bundle installed)."""
    env = base_env(home)
    flags = ("--mirror", str(mirror), *(["--offline"] if offline else []))
    if offline:
        assert sf(env, "runtime", "install", "basert", "--mirror", str(mirror)).code == 0
    rows = sf_json(env, "runtime", "versions", "basert", "--json", *flags)
    validate(rows, "versions")
    said = {r["version"]: (r["installs"] is True, r["install"]) for r in rows}
    assert said["0.3.0"] == (True, "0.3.0-cpu")
    for version, (installs, install) in said.items():
        dry = sf(env, "runtime", "install", "basert", "--version", version, "--dry-run", "--json", *flags)
        planned = json.loads(dry.stdout)["plans"][0]["install"] if dry.code == 0 else None
        assert (dry.code == 0, planned) == (installs, install), (version, dry.stderr)
        if not installs:
            reason = next(r["installs"] for r in rows if r["version"] == version)
            assert dry.stderr.startswith(f"superfluid: {reason.split(': `')[0]}"), (reason, dry.stderr)


@pytest.mark.parametrize(("rows", "version", "expected"), [
    pytest.param([{"version": "0.4.0", "installs": "not here", "install": None, "installed": False, "tested": True}],
                 "0.4.0", ["0.4.0"], id="a-pin-marked"),
    pytest.param([{"version": "0.3.0", "installs": "not here", "install": None, "installed": False, "tested": True}],
                 "0.4.0", ["0.4.0", "0.3.0"], id="a-newer-release-added-first"),
    pytest.param([{"version": "0.5.0", "installs": "ABI 2", "install": None, "installed": False, "tested": False}],
                 "0.4.0", ["0.5.0", "0.4.0"], id="an-older-release-added-after"),
])
def test_with_listing_marks_or_adds_the_chosen_version(rows: list[dict[str, object]], version: str,
                                                      expected: list[str]) -> None:
    chosen = {"version": version, "install": f"{version}-cpu", "chosen_by": "abi", "tested": True, "abi": 1,
              "platform": "linux-x64"}
    out = with_listing(rows, chosen, installed=[f"{version}-cpu"])
    assert [r["version"] for r in out] == expected
    (hit,) = [r for r in out if r["version"] == version]
    assert (hit["installs"], hit["install"], hit["source"], hit["chosen_by"]) == (True, f"{version}-cpu", "listing",
                                                                                  "abi")
    assert all(r.get("source") is None for r in out if r["version"] != version)
    assert rows[0].get("source") is None  # the input is not changed
