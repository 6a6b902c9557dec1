"""Errors in ``--json`` mode are JSON (issue 15, item 4): every command that takes ``--json``, made
to fail, prints ``{"error": {"code", "message", "exit"}}`` on stdout (schema ``error``) and the
same words on stderr, and exits with ``error.exit``. A command whose answer is itself the report
of the failure (``runtime check``, ``compat`` with a runtime unanswered) carries ``error`` inside
that document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from superfluid.parser import parser, walk
from superfluid.runtime.kernel.schema import errors as schema_errors
from tests import cli

MISSING_WORKER = {"SUPERFLUID_WORKER_LLAMACPP": "/nonexistent/superfluid-worker-llamacpp"}

#: (command path, argv, environment, exit code, error code): a failure of each command that takes --json
FAILURES = [
    ("runtimes", ["runtimes", "--json", "--bogus"], {}, 2, "usage"),
    ("compat", ["compat", "--json", "--release", "{tmp}/nope.compat.json"], {}, 2, "usage"),
    ("compat", ["compat", "--json", "--release", "{tmp}/broken.txt"], {}, 1, "bad-file"),
    ("compat", ["compat", "--json", "--release", ""], {}, 2, "usage"),
    ("runtime install", ["runtime", "install", "basert", "--json", "--offline"], {}, 1, "offline-missing"),
    ("runtime install", ["runtime", "install", "nope", "--json"], {}, 2, "usage"),
    ("runtime install", ["runtime", "install", "basert", "--json", "--from", "{tmp}"], {}, 2, "usage"),
    ("runtime versions", ["runtime", "versions", "llamacpp", "--json"], MISSING_WORKER, 1, "worker-failed"),
    ("runtime versions", ["runtime", "versions", "nope", "--json"], {}, 2, "usage"),
    ("runtime options", ["runtime", "options", "llamacpp", "--json"], MISSING_WORKER, 1, "worker-failed"),
    ("runtime update", ["runtime", "update", "basert", "--json"], {}, 1, "not-installable"),
    ("runtime repair", ["runtime", "repair", "basert", "--json"], {}, 1, "not-installable"),
    ("runtime remove", ["runtime", "remove", "basert", "0.4.0-cpu", "--json"], {}, 1, "no-such-install"),
    ("runtime remove", ["runtime", "remove", "basert", "--json"], {}, 2, "usage"),
    ("runtime list", ["runtime", "list", "nope", "--json"], {}, 2, "usage"),
    ("runtime check", ["runtime", "check", "llamacpp", "--json", "--n-gpu-layers", "lots"], {}, 2, "usage"),
    ("mirror push", ["mirror", "push", "https://registry.example/x", "--json"], {}, 2, "usage"),
    ("mirror push", ["mirror", "push", "oci://127.0.0.1:9/x", "--json", "--lock", "{tmp}/nope.lock"], {}, 2, "usage"),
    ("mirror push", ["mirror", "push", "oci://127.0.0.1:9/x", "--json", "--lock", "{tmp}/broken.txt"], {}, 1,
     "bad-file"),
    ("mirror sync", ["mirror", "sync", "{tmp}/m", "--json", "--lock", "{tmp}/nope.lock"], {}, 2, "usage"),
    ("mirror sync", ["mirror", "sync", "{tmp}/m", "--json", "--lock", "{tmp}/broken.txt"], {}, 1, "bad-file"),
    ("mirror verify", ["mirror", "verify", "{tmp}", "--json", "--lock", "{tmp}/nope.lock"], {}, 2, "usage"),
    ("mirror verify", ["mirror", "verify", "{tmp}", "--json", "--lock", "{tmp}/broken.txt"], {}, 1, "bad-file"),
    ("runtime verify", ["runtime", "verify", "basert", "--json"], {}, 1, "no-such-install"),
    ("runtime verify", ["runtime", "verify", "nope", "--json"], {}, 2, "usage"),
    ("runtime gc", ["runtime", "gc", "basert", "--json", "--keep", "x"], {}, 2, "usage"),
    ("runtime gc", ["runtime", "gc", "basert", "--json", "--lock", "{tmp}/nope.lock"], {}, 2, "usage"),
    ("cache du", ["cache", "du", "--json", "--keep-lock", "{tmp}/nope.lock"], {}, 2, "usage"),
    ("cache prune", ["cache", "prune", "--json", "--older-than", "3x"], {}, 2, "usage"),
    ("lock", ["lock", "--json", "--runtime", "nope"], {}, 2, "usage"),
    ("lock", ["lock", "--json", "--check", "-o", "{tmp}/nope.lock"], {}, 2, "usage"),
    ("lock", ["lock", "--json", "--check", "-o", "{tmp}/broken.txt"], {}, 1, "bad-file"),
    ("runtime use", ["runtime", "use", "basert", "0.4.0-cpu", "--json"], {}, 1, "no-such-install"),
    ("runtime repair", ["runtime", "repair", "basert", "0.4.0-cpu", "--json"], {}, 1, "no-such-install"),
    ("version", ["version", "--json", "--bogus"], {}, 2, "usage"),
    ("doctor", ["doctor", "--json", "--bogus"], {}, 2, "usage"),
    ("attestation verify", ["attestation", "verify", "{tmp}/broken.txt", "--bundle", "{tmp}/broken.txt", "--repo",
                            "a/b", "--json"], {}, 1, "provenance-refused"),
    ("attestation verify", ["attestation", "verify", "{tmp}/nope", "--bundle", "{tmp}/broken.txt", "--repo", "a/b",
                            "--json"], {}, 2, "usage"),
]


def _sf(tmp_path: Path, argv: list[str], env: dict[str, str]) -> cli.Run:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (tmp_path / "broken.txt").write_text("not a lock, not a compat document\n")
    return cli.run("superfluid", *(a.format(tmp=tmp_path) for a in argv), env=cli.environment(home, **env))


def test_the_table_covers_every_command_that_takes_json() -> None:
    takes = {p for p, n in walk(parser()) if any("--json" in a.option_strings for a in n._actions)}
    assert takes | {"runtime check"} <= {path for path, *_ in FAILURES}


@pytest.mark.parametrize(("path", "argv", "env", "code", "kind"), FAILURES,
                         ids=[f"{f[0]}:{f[4]}" for f in FAILURES])
def test_a_failure_in_json_mode_is_json(tmp_path: Path, path: str, argv: list[str], env: dict[str, str], code: int,
                                        kind: str) -> None:
    done = _sf(tmp_path, argv, env)
    assert done.code == code, done.stderr
    doc: Any = json.loads(done.stdout)  # nothing else on stdout
    assert schema_errors(doc, "error") == []
    error = doc["error"]
    assert (error["code"], error["exit"]) == (kind, code)
    assert done.stderr == f"superfluid: {error['message']}\n"  # the same words, once, on stderr
    if error.get("fix"):
        assert error["message"].endswith(error["fix"]) or error["fix"] in error["message"]


def test_without_json_nothing_is_printed_on_stdout(tmp_path: Path) -> None:
    done = _sf(tmp_path, ["runtime", "update", "basert"], {})
    assert done.code == 1 and done.stdout == "" and done.stderr.startswith("superfluid: basert is not installed")


def test_a_failed_check_carries_the_error_in_its_report(tmp_path: Path) -> None:
    done = _sf(tmp_path, ["runtime", "check", "basert", "--json", "--basert-lib", "{tmp}/nope"], {})
    assert done.code == 1
    report = json.loads(done.stdout)
    assert report["available"].startswith(f"--basert-lib names {tmp_path}/nope")
    fixes = [{"argv": ["superfluid", "runtime", "install", "basert"], "does": "installs it"}]
    assert report["error"] == {"code": "not-available", "message": report["available"], "exit": 1,
                               "fix": "superfluid runtime install basert", "fixes": fixes}
    assert schema_errors(report, "basert-check") == []


def test_compat_with_a_runtime_unanswered_carries_the_error(tmp_path: Path) -> None:
    done = _sf(tmp_path, ["compat", "--json"], MISSING_WORKER)
    assert done.code == 1
    doc = json.loads(done.stdout)
    assert "llamacpp" in doc["unanswered"] and doc["error"]["code"] == "unanswered" and doc["error"]["exit"] == 1
    assert schema_errors(doc, "compat") == []
