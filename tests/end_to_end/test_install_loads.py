"""What a plain ``runtime install`` loads: its own form only. ``--locked`` and ``--for`` (or
``SUPERFLUID_FOR``) are run by their own modules (``commands/install.py``'s ``runs_in``), so the
lock, signature and TUF machinery are never imported by an install that does not use them; each
form still loads what it runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import cli
from tests.end_to_end.conftest import Home
from tests.loaded_modules import Loaded, loaded
from tests.release_server import ReleaseServer

#: modules only another form of the install runs: a lock's, a release document's, a registry's login
ANOTHER_FORMS = ("superfluid.commands.install_locked", "superfluid.commands.install_for", "superfluid.commands.lock",
                 "superfluid.commands.compat", "superfluid.for_release", "superfluid.trust_flags",
                 "superfluid.installer.fleet", "superfluid.installer.trust.manifest",
                 "superfluid.installer.trust.tuf_client", "superfluid.installer.trust.service",
                 "superfluid.installer.trust.refusals", "superfluid.manifest.minisign",
                 "superfluid.manifest.routes", "superfluid.manifest.verdict")

def _loaded(home: Home, *argv: str) -> Loaded:
    return loaded("superfluid.cli", argv, home.env, python=cli.script("python"))


def test_a_plain_install_loads_no_other_form_of_the_install(cli_home: Home, server: ReleaseServer) -> None:
    run = _loaded(cli_home, "runtime", "install", "basert", "--mirror", server.mirror_url, "--json")
    assert run.code == 0
    assert json.loads(run.out)["receipt"]["version"] == "0.4.0"  # the newest of ABI 1, ours
    assert "superfluid.commands.install" in run.modules
    assert {m for p in ANOTHER_FORMS for m in run.under(p)} == set()
    # an asset without a Sigstore bundle is asked for one, and the verifier (sigstore) is never imported
    assert "superfluid.installer.trust.proving" in run.modules
    assert run.under("superfluid.installer.trust.provenance") == run.under("sigstore") == set()


def test_an_install_for_another_release_loads_its_reader(cli_home: Home, server: ReleaseServer,
                                                         tmp_path: Path) -> None:
    cli_home.env["SUPERFLUID_FOR"] = str(tmp_path / "missing.compat.json")  # named by the environment alone
    run = _loaded(cli_home, "runtime", "install", "basert", "--mirror", server.mirror_url, "--dry-run")
    assert run.code == 1  # the document is read first: it is missing
    assert {"superfluid.commands.install_for", "superfluid.for_release"} <= run.modules
    assert run.under("superfluid.installer.fleet") == set()
    assert cli_home.installs() == []


@pytest.mark.parametrize("flags", [["--locked", "nowhere.lock"], ["--locked", "nowhere.lock", "--for", "0.9.0"]],
                         ids=["locked", "locked-with-for"])
def test_an_install_from_a_lock_loads_the_lock_reader(cli_home: Home, tmp_path: Path, flags: list[str]) -> None:
    run = _loaded(cli_home, "runtime", "install", *flags)
    assert run.code == 2  # --for is refused with --locked; else the lock named is missing (a usage error)
    assert {"superfluid.commands.install_locked", "superfluid.installer.fleet.lockfile"} <= run.modules
    assert "superfluid.commands.install_for" not in run.modules
