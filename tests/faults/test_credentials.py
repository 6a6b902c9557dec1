"""Credentials are never stored or shown (issue 14, item 13): a ``user:password@`` in a mirror URL
(``--mirror`` or ``SUPERFLUID_MIRROR``) is sent to the mirror as a credential and found nowhere
else: not in the receipt, the cache, the progress or ``from`` lines, ``--dry-run --json``, or an
error message. Workers never see credentials by common names."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from superfluid.runtime.process import is_secret, scrubbed_env
from tests import cli
from tests.end_to_end import releases
from tests.faults.conftest import Home
from tests.release_server import ReleaseServer

SECRET = "s3cr3t-pa55"


@pytest.fixture
def basert_040(release_server: ReleaseServer, engines: Path) -> ReleaseServer:
    """The loopback server with one release of baseRT: 0.4.0 (ABI 1)."""
    releases.publish(release_server, [("0.4.0", 1)])
    return release_server


def _with_userinfo(url: str) -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme}://mirror-user:{SECRET}@{rest}"


def _everything_under(path: Path) -> bytes:
    out = b""
    for root, _dirs, files in os.walk(path):
        for name in files:
            p = Path(root) / name
            out += str(p).encode() + b"\n"
            if p.is_file() and not p.is_symlink():
                out += p.read_bytes()
    return out


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_a_mirror_password_is_used_and_never_kept_or_shown(tmp_path: Path, basert_040: ReleaseServer, how: str) -> None:
    home = Home(tmp_path / "home", cli.environment(tmp_path / "home"), tmp_path)
    home.path.mkdir()
    url = _with_userinfo(basert_040.mirror_url)
    flags = ["--mirror", url] if how == "flag" else []
    env = dict(home.env, SUPERFLUID_MIRROR=url) if how == "variable" else home.env
    dry = home.sf("runtime", "install", "basert", *flags, "--dry-run", "--json", env=env)
    run = home.sf("runtime", "install", "basert", *flags, env=env)
    assert dry.code == 0 and run.code == 0, run.stderr
    assert json.loads(dry.stdout)["plans"][0]["assets"][0]["url"].startswith(basert_040.mirror_url)
    for text in (dry.stdout, dry.stderr, run.stdout, run.stderr):
        assert SECRET not in text and "mirror-user" not in text
    stored = _everything_under(home.path)
    assert SECRET.encode() not in stored and b"mirror-user" not in stored
    receipt = json.loads((home.path / "runtimes" / "basert" / "0.4.0-cpu" / "runtime.json").read_text())
    assert receipt["sources"][0]["url"].startswith(basert_040.mirror_url)
    # the credential was sent, to the mirror, as HTTP Basic authorization
    import base64

    want = "Basic " + base64.b64encode(f"mirror-user:{SECRET}".encode()).decode()
    assert basert_040.log and all(entry.header("authorization") == want for entry in basert_040.log)


def test_a_failing_mirror_with_a_password_names_it_without_the_password(tmp_path: Path,
                                                                        basert_040: ReleaseServer) -> None:
    home = Home(tmp_path / "home", cli.environment(tmp_path / "home"), tmp_path)
    home.path.mkdir()
    name = releases.bundle_name("0.4.0")
    basert_040.fault(basert_040.mirror_path(releases.REPO, "v0.4.0", name), "status", status=404, times=100)
    run = home.sf("runtime", "install", "basert", "--mirror", _with_userinfo(basert_040.mirror_url))
    assert run.code == 1
    assert SECRET not in run.stderr and "mirror-user" not in run.stderr
    assert SECRET.encode() not in _everything_under(home.path)


CREDENTIALS = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "CI_JOB_JWT", "CI_JOB_JWT_V2",
               "VAULT_TOKEN_FILE", "SLACK_WEBHOOK_URL", "DOCKER_AUTH_CONFIG", "SSH_PASSPHRASE", "SSH_AUTH_SOCK",
               "GITHUB_TOKEN", "GH_TOKEN", "NPM_AUTH_TOKEN", "TWINE_PASSWORD", "DB_PASS", "SENTRY_DSN",
               "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CLIENT_SECRET", "SUPERFLUID_SIGNING_KEY", "HF_TOKEN",
               "GITHUBTOKEN", "MY_PRIVATE_KEY", "COOKIE_JAR", "OAUTH_CLIENT", "API_KEY", "APIKEY"]
ORDINARY = ["PATH", "HOME", "LANG", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "GGML_CUDA_NO_PINNED", "KEYBOARD",
            "MONKEY_PATCH", "SUPERFLUID_HOME", "SUPERFLUID_HOST_VULKAN", "BASERT_LIB", "VIRTUAL_ENV", "TMPDIR"]


@pytest.mark.parametrize("name", CREDENTIALS)
def test_credential_names_are_scrubbed(name: str) -> None:
    assert is_secret(name, "value") and name not in scrubbed_env({name: "value"})


@pytest.mark.parametrize("name", ORDINARY)
def test_what_engines_need_stays(name: str) -> None:
    assert not is_secret(name, "/usr/lib") and scrubbed_env({name: "/usr/lib"}) == {name: "/usr/lib"}


@pytest.mark.parametrize("value", ["https://u:p@proxy.example:3128", "--index-url https://tok@pypi.example/simple",
                                   "-----BEGIN OPENSSH PRIVATE KEY-----\nabc"], ids=["proxy", "in-text", "pem"])
def test_credential_values_are_scrubbed(value: str) -> None:
    assert is_secret("INNOCENT_NAME", value)


ENV_WORKER = """#!{python}
import json, os, sys
if sys.argv[1:2] == ["check"]:
    print(json.dumps({{"available": True, "runtime": {{"id": "llamacpp", "version": "t"}}, "env": sorted(os.environ)}}))
else:
    print("[]")
"""


def test_a_real_worker_sees_none_of_them(tmp_path: Path) -> None:
    worker = tmp_path / "env-worker"
    worker.write_text(ENV_WORKER.format(python=sys.executable))
    worker.chmod(0o755)
    env = cli.environment(tmp_path / "home")
    env.update({name: "value" for name in CREDENTIALS}, SUPERFLUID_WORKER_LLAMACPP=str(worker),
               SUPERFLUID_MIRROR=f"https://u:{SECRET}@mirror.example/")
    home = Home(tmp_path / "home", env, tmp_path)
    run = home.sf("runtime", "check", "llamacpp", "--json")
    assert run.code == 0, run.stderr
    seen = set(run.json()["env"])
    assert not seen & set(CREDENTIALS) and "SUPERFLUID_MIRROR" not in seen
    assert {"PATH", "SUPERFLUID_HOME"} <= seen


#: issue 36, item 1: credentials as real environments carry them, each with a value of its own
ENVIRONMENT_SECRETS = {
    name: f"secret-{i:02d}-{name.lower()}-Zq8" for i, name in enumerate((
        "GITHUB_TOKEN", "GH_TOKEN", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "NPM_TOKEN",
        "TWINE_PASSWORD", "TWINE_USERNAME", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_ID", "GOOGLE_API_KEY",
        "DATABASE_URL", "SENTRY_DSN", "CI_JOB_JWT", "CI_JOB_TOKEN", "VAULT_TOKEN", "VAULT_TOKEN_FILE",
        "DOCKER_PASSWORD", "DOCKER_AUTH_CONFIG", "SLACK_WEBHOOK_URL", "STRIPE_SECRET_KEY", "GITLAB_TOKEN",
        "CODECOV_TOKEN", "PYPI_API_TOKEN", "SSH_AUTH_SOCK", "MY_PRIVATE_THING", "UNRELATED_SETTING"))}
ENVIRONMENT_SECRETS["HTTPS_PROXY"] = "http://proxy-user:proxy-pa55-Zq8@127.0.0.1:9"
ENVIRONMENT_SECRETS["NO_PROXY"] = "*"  # the proxy above is never used: every address here is loopback


def test_no_variable_of_the_environment_is_written_into_the_home_or_shown(installed_home: Home) -> None:
    """Every command that keeps an answer (``runtimes`` its output; ``compat``, ``versions``,
    ``options`` and ``check`` the workers' answers) is run twice with 30+ credentials in the
    environment; no value is found in the home or in any output."""
    env = {**installed_home.env, **ENVIRONMENT_SECRETS}
    commands = [["runtimes"], ["runtimes", "--json"], ["runtime", "list", "basert"], ["compat", "--json"],
                ["runtime", "versions", "basert", "--json", *installed_home.repair_flags()],
                ["runtime", "options", "llamacpp", "--json"], ["runtime", "check", "basert", "--json"],
                ["runtime", "check", "llamacpp"]]
    outputs = []
    for argv in commands * 2:  # the second round answers from what the first one kept
        run = installed_home.sf(*argv, env=env)
        assert run.code in (0, 1), (argv, run.stderr)
        outputs += [run.stdout, run.stderr]
    assert (installed_home.path / "cache" / "outputs.json").is_file()  # an answer was kept
    written = _everything_under(installed_home.path)
    shown = "\n".join(outputs)
    for name, value in ENVIRONMENT_SECRETS.items():
        if name == "NO_PROXY":
            continue
        for part in {value, value.split("@")[0].rsplit(":", 1)[-1]}:
            assert part.encode() not in written, f"{name}'s value is written into the home"
            assert part not in shown, f"{name}'s value is shown"
