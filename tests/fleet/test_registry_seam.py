"""One network seam (issue 30): every request of a ``mirror push oci://`` and of an install from
``oci://`` goes through the fetcher the registry client is given. A recording fetcher (the requests
transport, recording each hop it is asked to send) is handed to the push and to the install's source,
against a real ``docker-registry`` that wants a login: what it recorded is, request for request,
what the registry's access log says it answered (the 401 challenges and their answers too), and no
request reached the registry around it."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

from superfluid.installer.config import FetchConfig
from superfluid.installer.fleet.lockfile import Lock, Target
from superfluid.installer.fleet.plans import plan_engine
from superfluid.installer.fleet.push import push
from superfluid.installer.install import install
from superfluid.installer.sources.choose import source_for
from superfluid.installer.sources.oci.client import registry_for
from superfluid.installer.sources.oci.ref import parse_ref
from superfluid.installer.transport.messages import FetchResponse, HttpRequest
from superfluid.installer.transport.requests_fetcher import RequestsFetcher
from superfluid.runtime.planning import Request as InstallRequest
from tests.fleet.conftest import Machine, machine_at
from tests.fleet.registry import Registry, docker_config
from tests.release_server import ReleaseServer
from tests.settings_from import settings_from


class Recording(RequestsFetcher):
    """The requests transport, recording ``(method, target)`` of every hop it sends to ``host``."""

    def __init__(self, host: str) -> None:
        super().__init__(FetchConfig())
        self.host = host
        self.seen: list[tuple[str, str]] = []
        self._seen_lock = threading.Lock()

    def _send(self, request: HttpRequest) -> FetchResponse:
        parts = urlsplit(request.url)
        if parts.netloc == self.host:
            with self._seen_lock:
                self.seen.append((request.method, parts.path + (f"?{parts.query}" if parts.query else "")))
        return super()._send(request)


def _answered(registry: Registry) -> Counter[tuple[str, str]]:
    return Counter((a.method, a.path) for a in registry.log())


def test_every_request_of_a_push_and_an_install_goes_through_the_fetcher(
        tmp_path: Path, admin: Machine, fleet_server: ReleaseServer) -> None:
    target = Target("basert", "linux-x64", "cpu")
    engine = plan_engine(InstallRequest(id="basert"), target, settings_from(admin.env))
    lock = Lock("0.1.0", ("basert",), ("linux-x64",), ("cpu",), (engine,))
    with Registry(tmp_path / "registry", auth=True) as registry:
        auth = docker_config(tmp_path / "login", registry.host)
        ref = parse_ref(registry.url)

        # the push: HEADs, the index, uploads (POST, PUT), manifests, each challenge answered
        pushing = Recording(registry.host)
        env = {**admin.env, "REGISTRY_AUTH_FILE": str(auth)}
        registry.clear_log()
        done = push(lock, ref, settings_from(env), registry=registry_for(ref, settings_from(env), push=True,
                                                                         transport=pushing))
        pushing.close()
        assert done.sent and done.manifests_sent
        answered = _answered(registry)
        assert Counter(pushing.seen) == answered
        assert {m for m, _ in pushing.seen} >= {"HEAD", "GET", "POST", "PUT"}
        assert any(a.status == 401 for a in registry.log())  # challenged, and answered through it

        # an install from oci://: the index, the listing, its files, each the blob of its digest
        node = machine_at(tmp_path, "node")
        node_env = {**node.env, "REGISTRY_AUTH_FILE": str(auth)}
        installing = Recording(registry.host)
        source = source_for(settings_from(node_env, mirror=registry.url, offline=False), fetcher=installing)
        registry.clear_log()
        try:
            outcome = install(InstallRequest(id="basert"), settings_from(node_env), source=source)
        finally:
            source.close()
        assert outcome.receipt is not None and node.installs("basert") == [engine.install]
        answered = _answered(registry)
        assert Counter(installing.seen) == answered
        paths = [p for _, p in installing.seen]
        assert any("/manifests/releases." in p for p in paths)  # the index
        assert sum("/blobs/sha256:" in p for p in paths) >= 2  # the listing and the archive, at least
