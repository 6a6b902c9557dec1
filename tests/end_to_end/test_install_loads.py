"""What a plain ``runtime install`` loads: its own form only. ``--locked`` and ``--for`` (or
``SUPERFLUID_FOR``) are run by their own modules (``commands/install.py``'s ``runs_in``), so the
lock, signature and TUF machinery are never imported by an install that does not use them; each
form still loads what it runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import VENV_BIN
from tests.end_to_end.conftest import Home
from tests.release_server import ReleaseServer

#: modules only another form of the install runs: a lock's, a release document's, a registry's login
ANOTHER_FORMS = ("superfluid.commands.install_locked", "superfluid.commands.install_for", "superfluid.commands.lock",
                 "superfluid.commands.compat", "superfluid.for_release", "superfluid.trust_flags",
                 "superfluid.installer.fleet", "superfluid.installer.trust", "superfluid.manifest.minisign",
                 "superfluid.manifest.routes", "superfluid.manifest.verdict")

_LOADED = """\
import contextlib, io, json, sys
from superfluid.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = main(sys.argv[1:])
print(json.dumps({"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}))
"""


def _loaded(home: Home, *argv: str) -> tuple[int, str, set[str]]:
    done = subprocess.run([str(VENV_BIN / "python"), "-c", _LOADED, *argv], env=home.env, capture_output=True,
                          text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    return doc["code"], doc["out"], set(doc["modules"])


def _of(loaded: set[str], prefix: str) -> set[str]:
    return {m for m in loaded if m == prefix or m.startswith(prefix + ".")}


def test_a_plain_install_loads_no_other_form_of_the_install(cli_home: Home, server: ReleaseServer) -> None:
    code, out, loaded = _loaded(cli_home, "runtime", "install", "basert", "--mirror", server.mirror_url, "--json")
    assert code == 0
    assert json.loads(out)["receipt"]["version"] == "0.4.0"  # the newest of ABI 1, ours
    assert "superfluid.commands.install" in loaded
    assert {m for p in ANOTHER_FORMS for m in _of(loaded, p)} == set()


def test_an_install_for_another_release_loads_its_reader(cli_home: Home, server: ReleaseServer,
                                                         tmp_path: Path) -> None:
    cli_home.env["SUPERFLUID_FOR"] = str(tmp_path / "missing.compat.json")  # named by the environment alone
    code, _, loaded = _loaded(cli_home, "runtime", "install", "basert", "--mirror", server.mirror_url, "--dry-run")
    assert code == 1  # the document is read first: it is missing
    assert {"superfluid.commands.install_for", "superfluid.for_release"} <= loaded
    assert _of(loaded, "superfluid.installer.fleet") == set()
    assert cli_home.installs() == []


@pytest.mark.parametrize("flags", [["--locked", "nowhere.lock"], ["--locked", "nowhere.lock", "--for", "0.9.0"]],
                         ids=["locked", "locked-with-for"])
def test_an_install_from_a_lock_loads_the_lock_reader(cli_home: Home, tmp_path: Path, flags: list[str]) -> None:
    code, _, loaded = _loaded(cli_home, "runtime", "install", *flags)
    assert code == (2 if "--for" in flags else 1)  # --for is refused with --locked; else the lock is missing
    assert {"superfluid.commands.install_locked", "superfluid.installer.fleet.lockfile"} <= loaded
    assert "superfluid.commands.install_for" not in loaded
