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
