"""Fixtures for the installer's network half (``release_server`` and ``home`` come from
``tests/conftest.py``).

``object_store_server`` answers downloads with a redirect to a second port; ``area`` is a place
for hostile archives to aim outside of; ``cache`` the download cache of ``home``; ``fast`` a
``FetchConfig`` with short waits so fault tests take milliseconds; ``bundles`` the reference
engine's bundles as local files; ``sim`` a TUF repository simulator with one answer; ``file_lock``
a lock whose files are ``file://`` URLs.
"""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from superfluid.installer.cache.stores import Cache
from superfluid.installer.config import FetchConfig
from superfluid.installer.fleet.lockfile import Engine, Lock, LockedFile, Target
from superfluid.installer.transport.requests_fetcher import RequestsFetcher
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
    """The reference engine's bundles (``tests/end_to_end/releases.bundle``) as local files, by variant."""
    from tests.end_to_end.releases import bundle, bundle_name

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


#: the repository of ``file_lock``'s engines
LOCKED_REPO = "basecompute/baseRT"


def _file(src: Path, tag: str, name: str, data: bytes, repo: str = LOCKED_REPO) -> LockedFile:
    """A locked file whose bytes are ``data``, written at ``src/<tag>/<name>`` and named by a file:// URL."""
    where = src / repo / tag / name
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_bytes(data)
    return LockedFile(name=name, path=f"{repo}/releases/download/{tag}/{name}", url=where.as_uri(), size=len(data),
                      sha256=hashlib.sha256(data).hexdigest())  # type: ignore[arg-type]


def _engine(host: str, version: str, assets: tuple[LockedFile, ...], evidence: tuple[LockedFile, ...] = (),
            repo: str = LOCKED_REPO) -> Engine:
    return Engine(target=Target("basert", "linux-x64", host), repo=repo, version=version, backend=host,
                  chosen_by="abi", abi=1, tested=True, why="test", assets=assets, facts={},
                  evidence=evidence)


@pytest.fixture
def file_lock(tmp_path: Path) -> Lock:
    """A lock of three basert engines (four files: an ABI asset two share) whose URLs are ``file://``
    files under ``tmp_path/upstream``."""
    src = tmp_path / "upstream"
    abi = _file(src, "v0.4.0", "basert-engine-abi-1.txt", b"1\n")
    cpu = _engine("cpu", "0.4.0", (_file(src, "v0.4.0", "engine-cpu.tar.gz", b"cpu engine"),), (abi,))
    cuda = _engine("cuda", "0.4.0", (_file(src, "v0.4.0", "engine-cuda.tar.gz", b"cuda engine"),), (abi,))
    old = _engine("vulkan", "0.3.1", (_file(src, "v0.3.1", "engine-vulkan.tar.gz", b"vulkan engine"),))
    return Lock("0.1.0", ("basert",), ("linux-x64",), ("cpu", "cuda", "vulkan"), (cpu, cuda, old))
