"""Messages that say what happened (issue 15, item 3): bad input -> the message fragment a person
reads and the exit code, through the real ``superfluid`` command, with nothing changed on disk.

A directory given to ``--from`` is "a directory"; a bad ``SUPERFLUID_MIRROR`` is named as that
variable; a host name that does not resolve says the host cannot be reached and suggests
``--mirror``/``--offline`` after one retry, not five; an empty flag value (``compat --release ''``)
is a usage error; a usage error points at its command's own ``--help``.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import ConnectionRefused, DownloadError, HostUnreachable
from superfluid.installer.transport.fetcher import Fetcher
from superfluid.installer.transport.messages import FetchResponse, HttpRequest
from superfluid.installer.transport.requests_fetcher import RequestsFetcher
from tests import cli

UNRESOLVABLE = "https://api.nowhere.invalid"  # RFC 6761: never resolves


def _sf(tmp_path: Path, argv: list[str], env: Mapping[str, str] | None = None) -> tuple[int, str, str, float]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    began = time.monotonic()
    done = cli.run("superfluid", *argv, env=cli.environment(home, **(env or {})), cwd=tmp_path)
    return done.code, done.stdout, done.stderr, time.monotonic() - began


def _dir(tmp_path: Path) -> str:
    (tmp_path / "downloads").mkdir(exist_ok=True)
    return str(tmp_path / "downloads")


#: (argv, environment, the fragments of the one stderr line, exit code); {tmp} is the test's directory
BAD = [
    pytest.param(["runtime", "install", "basert", "--from", "{tmp}/downloads"], {},
                 ["--from {tmp}/downloads is a directory: name the archive file in it",
                  "--mirror {tmp}/downloads reads a directory of release files"], 2, id="from-a-directory"),
    pytest.param(["runtime", "install", "basert", "--from", "{tmp}/nope.tar.gz"], {},
                 ["--from {tmp}/nope.tar.gz: no such file"], 2, id="from-a-missing-file"),
    pytest.param(["runtime", "install", "basert", "--dry-run"], {"SUPERFLUID_MIRROR": "{tmp}/no-mirror"},
                 ["SUPERFLUID_MIRROR={tmp}/no-mirror: no such directory",
                  "set SUPERFLUID_MIRROR to an existing directory or a URL of http://, https://, file:// or oci://, "
                  "or unset it"], 2,
                 id="bad-SUPERFLUID_MIRROR-named-as-the-variable"),
    pytest.param(["runtime", "install", "basert", "--dry-run"], {"SUPERFLUID_MIRROR": "ftp://mirror.example/"},
                 ["SUPERFLUID_MIRROR=ftp://mirror.example/: not a mirror (a mirror is a directory, or a URL of "
                  "http://, https://, file:// or oci://)"], 2,
                 id="SUPERFLUID_MIRROR-of-another-scheme"),
    pytest.param(["runtime", "install", "basert", "--dry-run", "--mirror", "{tmp}/no-mirror"], {},
                 ["--mirror {tmp}/no-mirror: no such directory", "give --mirror an existing directory or a URL"], 2,
                 id="bad-mirror-flag"),
    pytest.param(["runtime", "install", "basert", "--dry-run"], {"SUPERFLUID_GITHUB_API": UNRESOLVABLE},
                 ["cannot reach api.nowhere.invalid: its name does not resolve", "(gave up after 2 attempts)",
                  "--mirror URL|DIR", "--offline"], 1, id="dns-failure"),
    pytest.param(["compat", "--release", ""], {}, ["--release: needs FILE|URL, not an empty string",
                                                   "(see 'superfluid compat --help')"], 2, id="compat-release-empty"),
    pytest.param(["runtime", "install", "basert", "--version", ""], {}, ["--version: needs V, not an empty string"], 2,
                 id="empty-version"),
    pytest.param(["runtimes", "--nope"], {}, ["unrecognized arguments: --nope (see 'superfluid runtimes --help')"], 2,
                 id="unknown-flag-points-at-its-command"),
    pytest.param(["runtime", "install", "nope"], {}, ["no runtime 'nope'", "(see 'superfluid runtime install --help')"],
                 2, id="unknown-runtime"),
    pytest.param(["runtime", "check", "llamacpp", "--n-gpu-layers", "lots"], {},
                 ["--n-gpu-layers 'lots': expected an integer from -1 to 2147483647",
                  "(see 'superfluid runtime check llamacpp --help')"], 2, id="bad-option-value"),
    pytest.param(["runtime"], {}, ["(see 'superfluid runtime --help')"], 2, id="runtime-without-a-command"),
    pytest.param(["completion", "tcsh"], {}, ["invalid choice: 'tcsh'", "(see 'superfluid completion --help')"], 2,
                 id="completion-of-an-unknown-shell"),
]


@pytest.mark.parametrize(("argv", "env", "fragments", "code"), BAD)
def test_bad_input(tmp_path: Path, argv: list[str], env: dict[str, str], fragments: list[str], code: int) -> None:
    if "downloads" in " ".join(argv):
        _dir(tmp_path)
    fill = {"tmp": str(tmp_path)}
    got, out, err, took = _sf(tmp_path, [a.format(**fill) for a in argv], {k: v.format(**fill) for k, v in env.items()})
    assert got == code, err
    assert out == "" and err.startswith("superfluid: ") and err.count("\n") == 1 and "Traceback" not in err
    for fragment in fragments:
        assert fragment.format(**fill) in err
    assert os.listdir(tmp_path / "home") in ([], ["cache"])  # nothing installed, nothing half-made
    if env.get("SUPERFLUID_GITHUB_API"):
        assert took < 6.0  # one retry (0.5 s), not five attempts (7.5 s of backoff)


# --- the rule under the DNS message: one retry, in the fetcher -------------------------------------------------


class _Unresolvable(Fetcher):
    """A transport whose every connection fails as a name that does not resolve (socket.gaierror)."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        super().__init__(FetchConfig(), sleep=self.waits.append)

    def _send(self, request: HttpRequest) -> FetchResponse:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def test_a_name_that_does_not_resolve_is_retried_once() -> None:
    fetcher = _Unresolvable()
    with pytest.raises(HostUnreachable) as e:
        fetcher.get_bytes("https://releases.example.invalid/x.json", max_bytes=1024)
    assert e.value.host == "releases.example.invalid" and e.value.attempts == 2
    assert fetcher.waits == [FetchConfig().backoff(0)] and fetcher.requests_made == 2
    assert "cannot reach releases.example.invalid: its name does not resolve (Name or service not known)" \
        in str(e.value)
    assert "--mirror URL|DIR" in str(e.value) and "--offline" in str(e.value)


def test_requests_reports_the_real_resolver_failure_as_unreachable() -> None:
    waits: list[float] = []
    fetcher = RequestsFetcher(FetchConfig(), sleep=waits.append)
    with pytest.raises(DownloadError) as e:
        fetcher.get_bytes(UNRESOLVABLE + "/repos/x/y/releases", max_bytes=1024)
    assert isinstance(e.value, HostUnreachable) and e.value.attempts == 2 and len(waits) == 1


def test_other_connection_faults_keep_every_retry() -> None:
    class Reset(_Unresolvable):
        def _send(self, request: HttpRequest) -> FetchResponse:
            raise ConnectionResetError(104, "Connection reset by peer")

    fetcher = Reset()
    with pytest.raises(DownloadError) as e:
        fetcher.get_bytes("https://127.0.0.1:9/x", max_bytes=1024)
    assert not isinstance(e.value, (HostUnreachable, ConnectionRefused))
    assert e.value.attempts == FetchConfig().retries + 1


def test_a_refused_connection_is_retried_once() -> None:
    class Refused(_Unresolvable):
        def _send(self, request: HttpRequest) -> FetchResponse:
            raise ConnectionRefusedError(111, "Connection refused")

    fetcher = Refused()
    with pytest.raises(ConnectionRefused) as e:
        fetcher.get_bytes("https://127.0.0.1:9/x", max_bytes=1024)
    assert e.value.attempts == 2 and fetcher.waits == [FetchConfig().backoff(0)]
    assert e.value.address == "127.0.0.1:9"


def test_requests_reports_a_real_refused_connection_as_refused() -> None:
    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        waits: list[float] = []
        fetcher = RequestsFetcher(FetchConfig(), sleep=waits.append)
        with pytest.raises(ConnectionRefused) as e:
            fetcher.get_bytes(f"http://127.0.0.1:{port}/x.json", max_bytes=1024)
    assert e.value.attempts == 2 and len(waits) == 1
    assert f"connection refused by 127.0.0.1:{port}: nothing listens there" in str(e.value)


def test_install_from_a_mirror_nobody_serves_fails_fast_naming_what_to_do(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        started = time.monotonic()
        done = cli.run("superfluid", "runtime", "install", "basert", "--mirror", f"http://127.0.0.1:{port}/",
                       env=cli.environment(tmp_path / "home"), timeout=60)
        took = time.monotonic() - started
    assert done.code == 1, done.stderr
    assert f"connection refused by 127.0.0.1:{port}" in done.stderr
    assert "is running" in done.stderr and "--offline" in done.stderr and "Traceback" not in done.stderr
    assert took < 5, took  # one retry after 0.5 s, not four with backoff (7.7 s)
    assert not (tmp_path / "home" / "runtimes").exists()
