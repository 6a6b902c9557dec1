"""``runtime versions basert --mirror M`` through the real ``superfluid`` (issue 42, items 10, 11): every
version M lists is a row, judged as ``install --version V --mirror M --dry-run`` plans it; its hints
are commands (``fix``/``fixes`` in --json) that keep ``--mirror``, suggested only where the same facts
allow them (pasted here), and the source is spelled one way."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests import cli
from tests.conftest import ROOT, Home
from tests.release_server import ReleaseServer


@pytest.fixture(scope="module")
def needs_mirror(tmp_path_factory: pytest.TempPathFactory, engines: Path) -> Path:
    """The demo's mirror (scripts/make-mirror): each bundle with its ``.needs.json`` (ci/engine-assets)."""
    root = tmp_path_factory.mktemp("needs") / "m"
    done = subprocess.run(["bash", str(ROOT / "scripts" / "make-mirror"), str(root)], capture_output=True, text=True,
                          env=cli.environment(), timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return root


def _rows(home: Home, mirror: Path) -> dict[str, dict[str, object]]:
    run = home.superfluid("runtime", "versions", "basert", "--mirror", str(mirror), "--json")
    assert run.code == 0, run.stderr
    return {r["version"]: r for r in run.json()}


def test_every_listed_version_is_a_row_as_install_plans_it(cli_home: Home, mirror: Path) -> None:
    rows = _rows(cli_home, mirror)
    assert list(rows) == ["0.5.0", "0.4.0", "0.3.1", "0.3.0", "0.2.6"]
    assert rows["0.3.1"]["installs"] is True and rows["0.3.1"]["install"] == "0.3.1-cpu"
    dry = cli_home.superfluid("runtime", "install", "basert", "--version", "0.3.1", "--mirror", str(mirror),
                              "--dry-run", "--json")
    assert dry.code == 0 and dry.json()["plans"][0]["install"] == "0.3.1-cpu"
    assert rows["0.5.0"]["installs"] is not True and "states ABI 2" in str(rows["0.5.0"]["installs"])
    for row in rows.values():
        assert "`" not in str(row.get("fix", "")) and "`" not in str(row["installs"])
    assert rows["0.5.0"]["fix"] == f"superfluid runtime install basert --version 0.5.0 --untested --mirror {mirror}"
    text = cli_home.superfluid("runtime", "versions", "basert", "--mirror", str(mirror))
    assert "file://" not in text.stdout and f"from the release listing (mirror {mirror}):" in text.stdout


def test_the_untested_hint_pasted_installs_the_version(cli_home: Home, mirror: Path) -> None:
    run = cli_home.superfluid("runtime", "versions", "basert", "--mirror", str(mirror))
    fix = run.fix("--version", "0.5.0")
    assert fix.argv[-2:] == ("--mirror", str(mirror)) and "--untested" in fix.argv
    pasted = cli.paste(fix, run, env=cli_home.env)
    assert pasted.code == 0, pasted.stderr
    assert (cli_home.path / "runtimes" / "basert" / "0.5.0-cpu").is_dir()


def test_a_host_the_untested_build_would_not_run_on_gets_no_untested_hint(cli_home: Home, needs_mirror: Path) -> None:
    """glibc 2.2: every bundle's needs refuse it, so ``--untested`` would not install 0.2.6 either:
    not suggested; the install that is refused names what lists the versions, which a paste proves."""
    cli_home.env["SUPERFLUID_HOST_GLIBC"] = "2.2"
    run = cli_home.superfluid("runtime", "versions", "basert", "--mirror", str(needs_mirror))
    assert run.code == 0, run.stderr
    assert not any("--untested" in f.argv for f in run.fixes), run.fixes
    assert "0.2.6 does not install here: " in run.stdout and "untested it would not install either" in run.stdout
    refused = cli_home.superfluid("runtime", "install", "basert", "--version", "0.2.6", "--untested", "--mirror",
                                  str(needs_mirror))
    assert refused.code == 1 and "needs GLIBC_2.3; this host has glibc 2.2" in refused.stderr
    lists = refused.fix("versions")
    assert lists.argv == ("superfluid", "runtime", "versions", "basert", "--mirror", str(needs_mirror))
    pasted = cli.paste(lists, refused, env=cli_home.env)
    assert "0.2.6 does not install here" in pasted.stdout
    # the same mirror on a host whose glibc runs the bundles: the hint is given, and it installs
    del cli_home.env["SUPERFLUID_HOST_GLIBC"]
    run = cli_home.superfluid("runtime", "versions", "basert", "--mirror", str(needs_mirror))
    fix = run.fix("--version", "0.2.6")
    pasted = cli.paste(fix, run, env=cli_home.env)
    assert pasted.code == 0, pasted.stderr
    assert (cli_home.path / "runtimes" / "basert" / "0.2.6-cpu").is_dir()


def test_the_pins_only_table_names_the_listings_dry_run_and_an_install_elsewhere(cli_home: Home, mirror: Path,
                                                                                  server: ReleaseServer) -> None:
    """Without a listing, on Linux x64 no pin installs: the hint is the dry run that asks the listing
    (here the loopback API's), pasted; an install made from the mirror is said, with what shows it."""
    cli_home.env["SUPERFLUID_GITHUB_API"] = server.url
    run = cli_home.superfluid("runtime", "versions", "basert")
    asks = run.fix("--dry-run")
    assert asks.argv == ("superfluid", "runtime", "install", "basert", "--dry-run")
    pasted = cli.paste(asks, run, env=cli_home.env)
    assert pasted.code == 0 and "basert 0.4.0-cpu" in pasted.stdout, pasted.stderr
    assert cli_home.superfluid("runtime", "install", "basert", "--mirror", str(mirror)).code == 0
    run = cli_home.superfluid("runtime", "versions", "basert")
    assert "0.4.0 is installed here all the same" in run.stdout
    shows = run.fix("runtimes")
    pasted = cli.paste(shows, run, env=cli_home.env)
    assert "0.4.0-cpu" in pasted.stdout


def test_the_listings_choice_pasted_installs_it_and_an_unpublished_version_lists_them(cli_home: Home,
                                                                                       mirror: Path) -> None:
    run = cli_home.superfluid("runtime", "versions", "basert", "--mirror", str(mirror))
    chosen = next(f for f in run.fixes if f.argv == ("superfluid", "runtime", "install", "basert", "--mirror",
                                                     str(mirror)))
    assert chosen.does == "installs 0.4.0 as 0.4.0-cpu"
    pasted = cli.paste(chosen, run, env=cli_home.env)
    assert pasted.code == 0 and (cli_home.path / "runtimes" / "basert" / "0.4.0-cpu").is_dir(), pasted.stderr
    nope = cli_home.superfluid("runtime", "install", "basert", "--version", "9.9.9", "--mirror", str(mirror))
    assert nope.code == 1 and "baseRT 9.9.9 is not published" in nope.stderr
    lists = nope.fix("versions")
    assert lists.argv == ("superfluid", "runtime", "versions", "basert", "--mirror", str(mirror))
    assert "leave --version out to install 0.4.0" in nope.stderr
    pasted = cli.paste(lists, nope, env=cli_home.env)
    assert "0.4.0" in pasted.stdout and "9.9.9" not in pasted.stdout
