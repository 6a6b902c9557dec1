"""``superfluid runtime list <id> [--json]`` (issue 25, item 6), through the real CLI: every install of a
runtime with its version, backend, platform, current, pinned and state; ``runtime use`` points
there; ``runtime remove <id>`` with no install removes nothing unless ``--all`` is given."""

from __future__ import annotations

import shutil

from superfluid.runtime.kernel.schema import errors as schema_errors
from tests import cli
from tests.end_to_end.conftest import Home
from tests.release_server import ReleaseServer


def test_lists_every_install_current_and_pinned(two: Home) -> None:
    assert two.superfluid("runtime", "use", "basert", "0.3.1-cpu").code == 0
    shutil.rmtree(two.basert / "0.4.0-cpu" / "lib")
    run = two.superfluid("runtime", "list", "basert", "--json")
    assert run.code == 0 and schema_errors(run.json(), "installs") == [], run.stderr
    doc = run.json()
    assert (doc["id"], doc["current"], doc["pinned"]) == ("basert", "0.3.1-cpu", "0.3.1-cpu")
    rows = {i["install"]: i for i in doc["installs"]}
    assert list(rows) == ["0.4.0-cpu", "0.3.1-cpu"]  # default order: newest first
    ready, broken = rows["0.3.1-cpu"], rows["0.4.0-cpu"]
    assert (ready["version"], ready["backend"], ready["current"], ready["pinned"], ready["state"], ready["fix"]) == (
        "0.3.1", "cpu", True, True, "ready", None)
    assert ready["platform"] == two.receipt("0.3.1-cpu")["platforms"][0]
    assert (broken["current"], broken["pinned"], broken["state"]) == (False, False, "broken")
    assert broken["problem"].startswith("missing lib/")
    assert broken["fix"] == "superfluid runtime repair basert 0.4.0-cpu"
    assert broken["fixes"] == [{"argv": broken["fix"].split(), "does": "puts it back"}]

    text = two.superfluid("runtime", "list", "basert").stdout.splitlines()
    assert text[0].split() == ["INSTALL", "VERSION", "BACKEND", "PLATFORM", "CURRENT", "PINNED", "STATE"]
    assert text[1].split()[:3] + text[1].split()[4:] == ["0.4.0-cpu", "0.4.0", "cpu", "no", "no", "broken"]
    assert text[2].split()[:3] + text[2].split()[4:] == ["0.3.1-cpu", "0.3.1", "cpu", "yes", "yes", "ready"]
    assert text[3].startswith("basert 0.4.0-cpu is broken: missing lib/") and \
        text[3].endswith("`superfluid runtime repair basert 0.4.0-cpu` puts it back")


def test_a_receipt_that_does_not_read_is_listed_broken(two: Home) -> None:
    (two.basert / "0.3.1-cpu" / "runtime.json").write_text("{")
    row = next(i for i in two.superfluid("runtime", "list", "basert", "--json").json()["installs"]
               if i["install"] == "0.3.1-cpu")
    assert (row["state"], row["version"], row["backend"]) == ("broken", None, None)
    assert "runtime.json" in row["problem"]


def test_nothing_installed_is_an_empty_list_exit_0(cli_home: Home, server: ReleaseServer) -> None:
    run = cli_home.superfluid("runtime", "list", "basert")
    assert run.code == 0
    assert run.stdout == "basert: nothing installed: `superfluid runtime install basert` installs it\n"
    doc = cli_home.superfluid("runtime", "list", "basert", "--json").json()
    assert doc == {"id": "basert", "current": None, "pinned": None, "installs": []}
    assert schema_errors(doc, "installs") == []
    env = {**cli_home.env, "SUPERFLUID_MIRROR": server.mirror_url}  # where this user installs from
    cli.paste(run.fix("install"), run, env=env)
    assert cli_home.installs() == ["0.4.0-cpu"]


def test_an_unknown_runtime_is_a_usage_error(cli_home: Home) -> None:
    run = cli_home.superfluid("runtime", "list", "nope", "--json")
    assert run.code == 2 and run.json()["error"]["code"] == "usage"


def test_use_points_at_runtime_list(two: Home) -> None:
    run = two.superfluid("runtime", "use", "basert")
    assert run.code == 2 and "`superfluid runtime list basert` lists its installs" in run.stderr
    assert "0.3.1-cpu" in cli.paste(run.fix("list"), run, env=two.env).stdout
    run = two.superfluid("runtime", "use", "basert", "9.9.9-cpu")
    assert run.code == 1
    assert run.stderr == ("superfluid: basert has no install 9.9.9-cpu (installed: 0.4.0-cpu, 0.3.1-cpu): "
                          "`superfluid runtime list basert` lists its installs\n")


def test_remove_without_an_install_needs_all(two: Home) -> None:
    run = two.superfluid("runtime", "remove", "basert")
    assert run.code == 2 and "needs the install to remove, or --all" in run.stderr
    assert two.installs() == ["0.3.1-cpu", "0.4.0-cpu"]  # nothing removed
    run = two.superfluid("runtime", "remove", "basert", "0.3.1-cpu", "--all")
    assert run.code == 2 and "not both" in run.stderr and two.installs() == ["0.3.1-cpu", "0.4.0-cpu"]
    run = two.superfluid("runtime", "remove", "basert", "--all", "--json")
    assert run.code == 0, run.stderr
    assert run.json() == {"id": "basert", "removed": ["0.4.0-cpu", "0.3.1-cpu"], "current": None}
    assert two.installs() == []


def test_help_and_completion_know_list_and_all(cli_home: Home) -> None:
    page = cli_home.superfluid("runtime", "list", "--help").stdout
    assert "superfluid runtime list basert" in page and "exit codes:" in page
    assert "--all" in cli_home.superfluid("runtime", "remove", "--help").stdout
    script = cli_home.superfluid("completion", "bash").stdout
    runtime_words = next(line for line in script.splitlines() if "'sub:runtime:'" in line)
    assert " list " in f" {runtime_words} ".replace("'", " ")
    remove_flags = next(line for line in script.splitlines() if "'flags:runtime remove:'" in line)
    assert "--all" in remove_flags
