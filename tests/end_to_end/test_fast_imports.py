"""The commands asked on every run import only what they use (issue 13, item 2).

The real console script runs in a subprocess under ``python -X importtime``, in a home where basert
is installed and every command has run once (warm: the recipes and the receipt validated once per
content, the workers' answers cached); the modules it imported are read from that report. None of
the network or schema libraries may be among them: an install imports them, a listing does not.
"""

from __future__ import annotations

import re

import pytest

from tests import cli
from tests.end_to_end.conftest import Home
from tests.release_server import ReleaseServer

#: what a command that reads only the home and the recipes never needs (sigstore, with pydantic and its
#: protobuf models, is imported only where a bundle is verified: issue 46)
HEAVY = ("requests", "urllib3", "jsonschema", "cryptography", "sigstore", "sigstore_models", "pydantic")
FAST = [
    ["--version"],
    ["runtimes", "--json"],
    ["runtime", "versions", "basert", "--json"],
    ["runtime", "versions", "llamacpp", "--json"],
    ["runtime", "options", "basert", "--json"],
    ["compat", "--json"],
]
_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$")


def imported(home: Home, argv: list[str]) -> set[str]:
    """The modules ``superfluid <argv>`` imports (the console script itself, as installed)."""
    done = cli.run("superfluid", *argv, env=home.env, timeout=60, prefix=[cli.script("python"), "-X", "importtime"])
    assert done.code == 0, done.stderr[-2000:]
    found = {m.group(1) for line in done.stderr.splitlines() if (m := _IMPORTED.match(line))}
    assert "superfluid" in found, "no import report: -X importtime did not run"
    return found


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_fast_commands_import_no_network_or_schema_library(cli_home: Home, server: ReleaseServer) -> None:
    run = cli_home.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url)
    assert run.code == 0, run.stderr
    for argv in FAST:  # warm: what is checked once per content is checked now
        assert cli_home.superfluid(*argv).code == 0
    reports = {" ".join(argv): imported(cli_home, argv) for argv in FAST}
    assert {line: heavy(modules) for line, modules in reports.items()} == {line: [] for line in reports}
    # hashlib is imported by every line since issue 36: the kept answer of ``runtimes`` is keyed by a
    # SHA-256 digest of the variables it depends on, never by their values (about 2 ms)
    # a mirror, on this machine or any other, is read through requests, the one HTTP client: a listing
    # and an install import it, and not the schema library (the recipes were validated once, and the
    # receipts an install writes and reads back are its own)
    at_home = ["runtime", "install", "basert", "--mirror", server.mirror_url]
    for line in ([*at_home, "--dry-run"], [*at_home, "--version", "0.3.1"]):
        libraries = {m.split(".")[0] for m in heavy(imported(cli_home, line))}
        assert "requests" in libraries and not libraries & {"jsonschema", "cryptography"}, (line, libraries)


def test_a_fresh_home_does_not_validate_what_the_package_ships_again(cli_home: Home) -> None:
    """The recipes ship with the package, and this release's compat document is made from what it
    ships: validated once per installation (a stamp beside the package's byte code), not once per
    home."""
    import os

    from superfluid import schemas

    for argv in FAST:  # stamps, wherever allowed
        assert cli_home.superfluid(*argv).code == 0
    stamps = os.path.join(os.path.dirname(str(schemas.__file__)), "__pycache__")
    if not any(n.startswith("validated-basert-recipe-") for n in os.listdir(stamps)):
        pytest.skip(f"{stamps} is not writable here: every fresh home validates the recipes")
    for argv in FAST:
        fresh = cli_home.path.parent / f"fresh-{'-'.join(argv).strip('-')}"
        fresh.mkdir()
        assert heavy(imported(Home(fresh, {**cli_home.env, "SUPERFLUID_HOME": str(fresh)}), argv)) == [], argv
    assert any(n.startswith("basert-recipe-") for n in os.listdir(fresh / "cache" / "validated"))
