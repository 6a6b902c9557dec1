"""tests/cli.py's environment: what of the developer's shell a test run of our commands never sees."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import cli

SHELL = {
    "GITHUB_TOKEN": "ghp_x", "GH_TOKEN": "gho_x", "AWS_SECRET_ACCESS_KEY": "k", "DATABASE_URL": "postgres://u:p@h/db",
    "HTTPS_PROXY": "http://proxy:3128", "SUPERFLUID_MIRROR": "/m", "SUPERFLUID_HOME": "/mine", "BASERT_LIB": "/l",
    "CI": "true", "VIRTUAL_ENV": "/venv", "PYTHONPATH": "/p", "OPENAI_BASE_URL": "http://x",
}


def test_the_developers_credentials_and_settings_are_left_out(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, value in {**SHELL, "SUPERFLUID_NATIVE_CACHE": "/cache", "LANG": "C.UTF-8"}.items():
        monkeypatch.setenv(name, value)
    env = cli.environment(tmp_path, SUPERFLUID_MIRROR="/given", GITHUB_TOKEN="given")
    assert set(SHELL) & set(env) == {"SUPERFLUID_HOME", "SUPERFLUID_MIRROR", "GITHUB_TOKEN"}
    assert (env["SUPERFLUID_HOME"], env["SUPERFLUID_MIRROR"], env["GITHUB_TOKEN"]) == (str(tmp_path), "/given", "given")
    assert (env["SUPERFLUID_NATIVE_CACHE"], env["LANG"]) == ("/cache", "C.UTF-8")
    assert "SUPERFLUID_HOME" not in cli.environment()


# -- every fix a run renders is judged (issue 42): these are the faults that fail any test that meets them --


def _fix(*argv: str, does: str = "does it") -> cli.Emitted:
    return cli.Emitted("superfluid.x:1", ("superfluid", *argv), does)


@pytest.mark.parametrize(("fix", "line", "code", "fault"), [
    pytest.param(_fix("runtime", "install", "basert"), ["runtime", "install", "basert"], 1,
                 "the command that just failed", id="the-command-that-failed"),
    pytest.param(_fix("runtime", "repair", "basert", "a"), ["runtime", "repair", "basert", "a", "--mirror", "/m"], 1,
                 "drops --mirror", id="mirror-dropped"),
    pytest.param(_fix("runtime", "install", "basert", "--offline"), ["runtime", "install", "basert"], 1,
                 "names --offline, which the line did not give", id="offline-not-given"),
    pytest.param(_fix("lock"), ["lock", "--plain-http"], 1, "drops --plain-http",
                 id="plain-http-dropped"),
])
def test_a_fix_that_misleads_fails_the_run(fix: cli.Emitted, line: list[str], code: int, fault: str) -> None:
    with pytest.raises(AssertionError, match=fault):
        cli._judge(fix, "superfluid", line, code)


@pytest.mark.parametrize(("fix", "line"), [
    pytest.param(_fix("runtime", "install", "basert", "--mirror", "/m"), ["runtime", "install", "basert", "--mirror",
                                                                        "/m", "--version", "9"], id="mirror-kept"),
    pytest.param(_fix("runtime", "install", "basert", does="fills the cache"), ["runtime", "repair", "basert",
                                                                                "--offline"], id="fill-the-cache"),
    pytest.param(_fix("runtime", "list", "basert"), ["runtime", "use", "basert", "x", "--mirror", "/m"],
                 id="takes-no-mirror"),
    pytest.param(_fix("runtime", "install", "basert", "--from", "f"), ["runtime", "install", "basert", "--mirror",
                                                                     "/m"], id="from-its-own-source"),
])
def test_a_fix_that_keeps_the_line_passes(fix: cli.Emitted, line: list[str]) -> None:
    cli._judge(fix, "superfluid", line, 1)


def test_a_json_fix_in_prose_fails_the_run() -> None:
    with pytest.raises(AssertionError, match="a JSON fix holds prose"):
        cli._no_prose_fix('{"installs": [{"fix": "run `superfluid runtime repair basert a`"}]}')
    cli._no_prose_fix('{"installs": [{"fix": "superfluid runtime repair basert a"}]}')
