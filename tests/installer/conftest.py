"""Fixtures for the installer's network half (``release_server`` and ``home`` come from
``tests/conftest.py``).

``object_store_server`` answers downloads with a redirect to a second port; ``area`` is a place
for hostile archives to aim outside of; ``cache`` the download cache of ``home``; ``fast`` a
``FetchConfig`` with short waits so fault tests take milliseconds; ``bundles`` the reference
engine's bundles as local files; ``sim`` a TUF repository simulator with one answer.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from superfluid.installer.cache import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.fetcher import RequestsFetcher
from tests.release_server import ReleaseServer
from tests.tuf_simulator import TufSimulator

REPO = "basecompute/baseRT"
#: the answer ``sim`` publishes, and its bytes
ANSWER = "v1/releases/0.2.0.json"
FIRST = b'{"version": "0.2.0"}\n'


@pytest.fixture
def object_store_server() -> Iterator[ReleaseServer]:
    with ReleaseServer(object_store=True) as server:
        yield server


@pytest.fixture
def area(tmp_path: Path) -> Path:
    """``tmp_path`` holding ``outside/victim`` (what an archive must never reach), ``stage/`` (the
    parent of an extraction's destination) and ``staging/`` (whose ``lib`` a streamed archive lands in)."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "victim").write_text("precious\n")
    (tmp_path / "stage").mkdir()
    (tmp_path / "staging").mkdir()
    return tmp_path


@pytest.fixture
def cache(home: Path) -> Cache:
    return Cache.for_home(home)


@pytest.fixture
def fast() -> FetchConfig:
    return FetchConfig(retries=3, backoff_base=0.01, backoff_max=0.05, stall_timeout=2.0, connect_timeout=2.0,
                       chunk_size=64 << 10)


@pytest.fixture
def fetcher(fast: FetchConfig) -> Iterator[RequestsFetcher]:
    f = RequestsFetcher(fast)
    yield f
    f.close()


@pytest.fixture
def no_sockets(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Make any outgoing connection attempt fail loudly; answers the list of attempts."""
    attempts: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise AssertionError(f"a connection was opened to {address!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts


@pytest.fixture(scope="session")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The reference engine's bundles (``tests/install/releases.bundle``) as local files, by variant."""
    from tests.install.releases import bundle, bundle_name

    folder = tmp_path_factory.mktemp("bundles")
    out = {}
    for variant in ("0.3.1", "0.4.0", "0.5.0", "missing-symbol"):
        path = folder / bundle_name(variant)
        path.write_bytes(bundle(variant))
        out[variant] = path
    return out


@pytest.fixture
def sim() -> Iterator[TufSimulator]:
    """A TUF repository simulator on loopback that has published one answer, ``ANSWER``."""
    s = TufSimulator()
    s.publish({ANSWER: FIRST})
    yield s
    s.close()
