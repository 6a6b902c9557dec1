"""One verdict of an install (issue 42, design point 3), through the real CLI: ``runtimes``, ``runtimes
<model>``, ``runtime list``, ``runtime use``, ``serve``, ``doctor`` and ``gc`` say the same word of an
install in each state (ready, untested, changed in place at its size with its mtime restored, a file
missing, a receipt that does not read); ``serve`` refuses the changed one; a copied home is changed
once, until ``runtime verify`` hashes it; each fix the verdict names is pasted and does what it says.
Items 3, 17 and 18."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from superfluid.commands import serve as serve_command
from superfluid.runtime.kernel.schema import errors as schema_errors
from tests import cli
from tests.conftest import native_cache
from tests.end_to_end.conftest import Home
from tests.release_server import ReleaseServer

LIB = "libbaseRT.dylib" if sys.platform == "darwin" else "libbaseRT.so"
MODEL = native_cache() / "basert" / "models" / "tiny.base"


@pytest.fixture
def both(cli_home: Home, server: ReleaseServer) -> Home:
    """basert 0.4.0-cpu (the ABI this superfluid drives, current) and 0.5.0-cpu installed untested (ABI 2)."""
    for flags in ((), ("--version", "0.5.0", "--untested")):
        run = cli_home.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url, *flags)
        assert run.code == 0, run.stderr
    assert cli_home.current() == "0.4.0-cpu"
    return cli_home


def _in_place(home: Home) -> None:
    """Rewrite a byte of 0.4.0-cpu's library where it is, at its size, and put its mtime back."""
    lib = home.basert / "0.4.0-cpu" / "lib" / LIB
    st = lib.stat()
    with open(lib, "r+b") as f:
        f.seek(st.st_size - 1)
        last = f.read(1)
        f.seek(st.st_size - 1)
        f.write(bytes([last[0] ^ 1]))
    os.utime(lib, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert lib.stat().st_size == st.st_size and lib.stat().st_mtime_ns == st.st_mtime_ns


def _untested(home: Home) -> None:
    run = home.superfluid("runtime", "use", "basert", "0.5.0-cpu")
    assert run.code == 0, run.stderr


#: state -> (what is done to the home, the install judged, its word)
STATES: dict[str, tuple[Callable[[Home], None], str, str]] = {
    "ready": (lambda home: None, "0.4.0-cpu", "ready"),
    "untested": (_untested, "0.5.0-cpu", "untested"),
    "changed-in-place": (_in_place, "0.4.0-cpu", "changed"),
    "missing-file": (lambda home: (home.basert / "0.4.0-cpu" / "lib" / "LICENSE").unlink(), "0.4.0-cpu", "broken"),
    "unreadable-receipt": (lambda home: (home.basert / "0.4.0-cpu" / "runtime.json").write_text("{"), "0.4.0-cpu",
                           "broken"),
}


def _json(home: Home, *argv: str, schema: str | None = None, code: int = 0) -> Any:
    run = home.superfluid(*argv, "--json")
    assert run.code == code, run.stderr
    if schema is not None:
        assert schema_errors(run.json(), schema) == [], run.stdout
    return run.json()


@pytest.mark.parametrize("state", list(STATES))
def test_seven_commands_say_one_word_of_an_install(both: Home, state: str) -> None:
    damage, install, word = STATES[state]
    damage(both)
    basert = next(r for r in _json(both, "runtimes", schema="runtimes") if r["id"] == "basert")
    assert (basert["state"], basert.get("install")) == (word, install), basert
    model = _json(both, "runtimes", str(MODEL), schema="runtimes-model", code=0 if word == "ready" else 1)
    assert next(r for r in model["runtimes"] if r["id"] == "basert")["state"] == word
    listed = _json(both, "runtime", "list", "basert", schema="installs")
    assert next(i for i in listed["installs"] if i["install"] == install)["state"] == word
    doctor = _json(both, "doctor", schema="doctor", code=0 if word in ("ready", "untested") else 1)
    assert {i["install"]: i["state"] for i in next(r for r in doctor["runtimes"] if r["id"] == "basert")[
        "installed"]}[install] == word
    assert [p["message"].split(":")[0] for p in doctor["problems"]] == (  # issue 44: listed, with its fix
        [] if word in ("ready", "untested") else [f"basert {install} is {word}"])
    gc = _json(both, "runtime", "gc", "basert", "--keep", "9", "--dry-run", schema="gc")
    assert {k["install"]: k["state"] for k in gc["kept"]}[install] == word
    if word == "ready":
        server = both.popen("serve", "--model", str(MODEL), "--port", "0")
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            assert f"(installed: {both.basert / install})" in line, line
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.communicate(timeout=30)
    else:
        run = both.superfluid("serve", "--model", str(MODEL), "--port", "0", timeout=60)
        assert run.code == 4 and run.stdout == "" and f"basert {install} is {word}" in run.stderr, run.stderr
    use = both.superfluid("runtime", "use", "basert", install, "--json")
    if word in ("ready", "untested"):
        assert use.code == 0 and use.json()["state"] == word, use.stderr
        assert schema_errors(use.json(), "use-result") == []
    else:
        assert use.code == 1 and f"basert {install} is {word}" in use.json()["error"]["message"], use.stdout


def test_serve_names_the_changed_file_and_its_repair_which_puts_it_back(both: Home) -> None:
    _in_place(both)
    run = both.superfluid("serve", "--model", str(MODEL), "--port", "0")
    assert run.code == 4, run.stderr
    assert run.stderr.startswith(f"superfluid: basert 0.4.0-cpu is changed: changed lib/{LIB} (rewritten since it "
                                 "was installed: its change time differs from the receipt's, at the same size)")
    assert "`superfluid runtime repair basert 0.4.0-cpu` puts it back" in run.stderr
    cli.paste(run.fix("repair"), run, env=both.env)
    listed = _json(both, "runtime", "list", "basert")
    assert next(i for i in listed["installs"] if i["install"] == "0.4.0-cpu")["state"] == "ready"
    assert both.superfluid("runtime", "verify", "basert", "0.4.0-cpu").code == 0


def test_verify_of_a_changed_file_names_the_repair(both: Home) -> None:
    _in_place(both)
    run = both.superfluid("runtime", "verify", "basert", "0.4.0-cpu")
    assert run.code == 1 and f"changed lib/{LIB} (its SHA-256 is" in run.stdout
    cli.paste(run.fix("repair"), run, env=both.env)
    assert both.superfluid("runtime", "verify", "basert", "0.4.0-cpu").code == 0


def test_a_copied_home_is_changed_once_until_verify_records_it(both: Home, tmp_path: Path) -> None:
    """Every file of a copy has a new inode and change time: a glance calls each install changed;
    verify hashes them, finds every byte as recorded, and records the stat facts as they are now
    (as git's index does): ready from then on."""
    copy = tmp_path / "copied"
    shutil.copytree(both.path, copy, symlinks=True)
    home = Home(copy, cli.environment(copy))
    listed = _json(home, "runtime", "list", "basert")
    row = next(i for i in listed["installs"] if i["install"] == "0.4.0-cpu")
    assert row["state"] == "changed" and "inode" in row["problem"], row
    run = home.superfluid("runtimes")
    assert "changed" in run.stdout, run.stdout
    cli.paste(run.fix("verify"), run, env=home.env)
    for _ in range(2):  # once recorded, it stays ready
        listed = _json(home, "runtime", "list", "basert")
        assert next(i for i in listed["installs"] if i["install"] == "0.4.0-cpu")["state"] == "ready"
    assert "mtime_ns" in home.receipt("0.4.0-cpu")["files"][0] or "link" in home.receipt("0.4.0-cpu")["files"][0]
    assert schema_errors(home.receipt("0.4.0-cpu"), "runtime") == []


def test_a_copied_home_is_ready_again_after_the_repair_its_verdict_names_first(both: Home, tmp_path: Path) -> None:
    """The first fix of a changed install is its repair: pasted on a copied home, where every byte
    holds, it puts nothing back and records the stat facts as they are now, so the install is ready
    (it said "nothing to repair" and left the install changed for ever)."""
    copy = tmp_path / "copied"
    shutil.copytree(both.path, copy, symlinks=True)
    home = Home(copy, cli.environment(copy))
    run = home.superfluid("runtimes")
    assert "changed" in run.stdout, run.stdout
    repaired = cli.paste(run.fix("repair"), run, env=home.env)
    assert "nothing to repair" in repaired.stdout and "stat facts recorded as they are now" in repaired.stdout
    listed = _json(home, "runtime", "list", "basert")
    assert next(i for i in listed["installs"] if i["install"] == "0.4.0-cpu")["state"] == "ready"


def test_serve_hashes_a_changed_install_and_serves_a_copied_home(both: Home, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A glance cannot tell a copied home from a file rewritten in place: serve, about to load the
    engine, hashes a changed install; every byte as recorded is served (not refused for ever where
    the home cannot be written, as in an image), and its stat facts are recorded where it can."""
    copy = tmp_path / "copied"
    shutil.copytree(both.path, copy, symlinks=True)
    monkeypatch.setenv("SUPERFLUID_HOME", str(copy))
    assert _json(Home(copy, cli.environment(copy)), "runtime", "list", "basert")["installs"][0]["state"] == "changed"
    assert serve_command._judged("basert", None, dict(os.environ)) is None
    listed = _json(Home(copy, cli.environment(copy)), "runtime", "list", "basert")
    assert next(i for i in listed["installs"] if i["install"] == "0.4.0-cpu")["state"] == "ready"
    lib = next((copy / "runtimes" / "basert" / "0.4.0-cpu" / "lib").glob("libbaseRT*"))
    data = lib.read_bytes()
    lib.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # the same size, one byte changed
    verdict = serve_command._judged("basert", None, dict(os.environ))
    assert verdict is not None and verdict.state == "changed"


def test_item_3_untested_is_one_word_and_use_warns_naming_the_one_it_drives(both: Home) -> None:
    """Issue 42, item 3: an untested ABI-2 install was ready to runtime list, broken to runtimes,
    pinned by use with no word, and serve exited 4: each now says untested; use pins it with a
    warning naming 0.4.0-cpu, which it drives, and its pasted fixes do what they say."""
    run = both.superfluid("runtime", "use", "basert", "0.5.0-cpu")
    assert run.code == 0 and both.current() == "0.5.0-cpu"
    assert run.stderr.startswith("superfluid: warning: basert 0.5.0-cpu is untested: installed with --untested; its "
                                 "library states ABI 2: this superfluid does not drive it; it is made the default as "
                                 "asked: `superfluid runtime use basert 0.4.0-cpu` makes 0.4.0-cpu, which it drives, "
                                 "the default"), run.stderr
    assert "serves from 0.5.0-cpu (untested) by default, pinned" in run.stdout
    assert "untested" in both.superfluid("runtimes").stdout.splitlines()[1]
    cli.paste(run.fix("0.4.0-cpu"), run, env=both.env)
    assert both.current() == "0.4.0-cpu" and (both.basert / "pinned").read_text().strip() == "0.4.0-cpu"
    pinned = both.superfluid("runtime", "use", "basert", "0.4.0-cpu")
    cli.paste(pinned.fix("--auto"), pinned, env=both.env)
    assert not (both.basert / "pinned").exists() and both.current() == "0.4.0-cpu"


def test_item_18_serve_of_an_untested_install_names_the_one_it_drives(both: Home) -> None:
    run = both.superfluid("serve", "--model", str(MODEL), "--port", "0", "--runtime", "basert@0.5.0-cpu")
    assert run.code == 4, run.stderr
    assert run.stderr.startswith("superfluid: basert 0.5.0-cpu is untested: ")
    assert "--runtime basert@0.4.0-cpu serves 0.4.0-cpu, which it drives" in run.stderr
    assert "install one this superfluid drives" not in run.stderr
    both.superfluid("runtime", "use", "basert", "0.5.0-cpu")
    run = both.superfluid("serve", "--model", str(MODEL), "--port", "0")
    assert run.code == 4 and "basert 0.5.0-cpu is untested" in run.stderr
    cli.paste(run.fix("use", "0.4.0-cpu"), run, env=both.env)
    assert both.current() == "0.4.0-cpu"


def test_an_untested_install_alone_names_the_install_of_one_it_drives(cli_home: Home, server: ReleaseServer) -> None:
    run = cli_home.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url, "--version", "0.5.0",
                              "--untested")
    assert run.code == 0, run.stderr
    run = cli_home.superfluid("runtime", "list", "basert")
    assert "basert 0.5.0-cpu is untested: " in run.stdout
    env = {**cli_home.env, "SUPERFLUID_MIRROR": server.mirror_url}  # where this user installs from
    cli.paste(run.fix("install"), run, env=env)
    assert cli_home.installs() == ["0.4.0-cpu", "0.5.0-cpu"] and cli_home.current() == "0.4.0-cpu"


def test_item_17_serve_of_an_install_not_there_lists_the_installs(both: Home, server: ReleaseServer) -> None:
    run = both.superfluid("serve", "--model", str(MODEL), "--port", "0", "--runtime", "basert@nope")
    assert run.code == 4 and "--version nope" not in run.stderr, run.stderr
    assert run.stderr == ("superfluid: basert@nope is not installed (installs of basert here: 0.4.0-cpu, 0.5.0-cpu): "
                          "`superfluid runtime list basert` lists its installs\n")
    assert "0.5.0-cpu" in cli.paste(run.fix("list"), run, env=both.env).stdout
    env = {**both.env, "SUPERFLUID_MIRROR": server.mirror_url}
    run = cli.run("superfluid", "serve", "--model", str(MODEL), "--port", "0", "--runtime", "basert@0.3.1-cpu",
                  env=env)
    assert run.code == 4 and run.fixes[0].argv == ("superfluid", "runtime", "install", "basert", "--version", "0.3.1",
                                                   "--backend", "cpu"), run.stderr
    cli.paste(run.fix("install"), run, env=env)
    assert "0.3.1-cpu" in both.installs()


def test_a_current_that_is_no_link_names_use_auto(both: Home) -> None:
    (both.basert / "current").unlink()
    (both.basert / "current").write_text("0.4.0-cpu")
    run = both.superfluid("runtimes")
    assert "is a regular file, not a link to an install" in run.stdout
    cli.paste(run.fix("--auto"), run, env=both.env)
    assert both.current() == "0.4.0-cpu"


def test_verify_names_list_and_install(cli_home: Home, server: ReleaseServer) -> None:
    run = cli_home.superfluid("runtime", "verify", "basert")
    assert run.code == 1 and "basert is not installed" in run.stderr
    env = {**cli_home.env, "SUPERFLUID_MIRROR": server.mirror_url}
    cli.paste(run.fix("install"), run, env=env)
    assert cli_home.installs() == ["0.4.0-cpu"]
    run = cli_home.superfluid("runtime", "verify", "basert", "nope", "--json")
    assert run.code == 1 and run.json()["error"]["fix"] == "superfluid runtime list basert"
    assert "0.4.0-cpu" in cli.paste(run.fix("list"), run, env=cli_home.env).stdout


def test_not_for_this_host(both: Home) -> None:
    env = {**both.env, "SUPERFLUID_HOST_ARCH": "arm64" if "x64" in both.receipt("0.4.0-cpu")["platforms"][0]
           else "x64"}
    run = cli.run("superfluid", "runtime", "list", "basert", "--json", env=env)
    row = next(i for i in run.json()["installs"] if i["install"] == "0.4.0-cpu")
    assert row["state"] == "not for this host" and row["fix"] is None and row["advice"], row
    rows = cli.run("superfluid", "runtimes", "--json", env=env).json()
    assert next(r for r in rows if r["id"] == "basert")["state"] == "not for this host"


def test_a_receipt_that_does_not_read_is_broken_and_its_repair_puts_it_back(both: Home, server: ReleaseServer) -> None:
    (both.basert / "0.4.0-cpu" / "runtime.json").write_text("{")
    run = both.superfluid("runtime", "list", "basert")
    assert "basert 0.4.0-cpu is broken: " in run.stdout and "is not valid JSON" in run.stdout
    env = {**both.env, "SUPERFLUID_MIRROR": server.mirror_url}  # the receipt that named its mirror is gone
    cli.paste(run.fix("repair"), run, env=env)
    listed = _json(both, "runtime", "list", "basert")
    assert next(i for i in listed["installs"] if i["install"] == "0.4.0-cpu")["state"] == "ready"


def _nested(text: str) -> bool:
    depth = 0
    for c in text:
        depth += (c == "(") - (c == ")")
        if depth > 1:
            return True
    return False


def test_item_33_gc_says_each_word_without_parentheses_in_parentheses(both: Home) -> None:
    for keep in ("9", "0"):
        run = both.superfluid("runtime", "gc", "basert", "--keep", keep, "--dry-run")
        assert run.code == 0 and not any(_nested(line) for line in run.stdout.splitlines()), run.stdout
    run = both.superfluid("runtime", "gc", "basert", "--keep", "9", "--dry-run")
    assert run.stdout == ("superfluid: basert: nothing to collect; kept 0.4.0-cpu (ready: one of the newest 9, "
                          "current), 0.5.0-cpu (untested: one of the newest 9, counted after the installs this "
                          "superfluid drives)\n")
