"""Shared test fixtures, each defined once: a fresh home (as a directory, exported, or with the CLI's
environment), the loopback release server, a minisign key, a Sigstore made in memory, the reference engine's
variants, the real libllama builds and the tiny GGUF models; and the check of a worker's ``install`` answer."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

from tests import cli
from tests.cli import Run

if TYPE_CHECKING:
    from superfluid.installer.trust.provenance import Root
    from superfluid.manifest.minisign import SecretKey
    from tests.fleet.registry import Registry
    from tests.installer.trust.sigstore_simulator import SigstoreSimulator
    from tests.release_server import ReleaseServer

ROOT = Path(__file__).resolve().parent.parent


def native_cache() -> Path:
    return Path(os.environ.get("SUPERFLUID_NATIVE_CACHE") or ROOT / ".cache" / "native")


@dataclass
class Home:
    """A SUPERFLUID_HOME, the environment that names it, and the real ``superfluid`` run against it."""

    path: Path
    env: dict[str, str]

    @property
    def basert(self) -> Path:
        return self.path / "runtimes" / "basert"

    def receipt(self, install: str) -> dict[str, Any]:
        return json.loads((self.basert / install / "runtime.json").read_text())

    def current(self) -> str | None:
        try:
            return os.readlink(self.basert / "current")
        except OSError:
            return None

    def installs(self) -> list[str]:
        if not self.basert.is_dir():
            return []
        return sorted(n for n in os.listdir(self.basert) if not n.startswith(".") and n not in ("current", "pinned"))

    def leftovers(self) -> list[str]:
        if not self.basert.is_dir():
            return []
        return sorted(n for n in os.listdir(self.basert) if n.startswith(".") and n != ".install.lock")

    def superfluid(self, *argv: str, timeout: float = 120) -> Run:
        return cli.run("superfluid", *argv, env=self.env, timeout=timeout)

    def popen(self, *argv: str) -> subprocess.Popen[str]:
        return cli.start("superfluid", *argv, env=self.env, new_session=True)


# -- homes -------------------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh, empty SUPERFLUID_HOME directory (not exported: pass it in an environment)."""
    path = tmp_path / "sfhome"
    path.mkdir()
    return path


@pytest.fixture
def sf_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``home``, set as SUPERFLUID_HOME in this process's environment, without the variables that
    would name a library, a mirror or a worker instead."""
    monkeypatch.setenv("SUPERFLUID_HOME", str(home))
    for name in ("BASERT_LIB", "SUPERFLUID_LLAMA_LIB", "SUPERFLUID_MIRROR"):
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):
        if name.startswith("SUPERFLUID_WORKER_"):
            monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def cli_home(home: Path) -> Home:
    """``home`` with an isolated environment naming it, to run the real CLI in."""
    return Home(home, cli.environment(home))


# -- servers -----------------------------------------------------------------------------------------


@pytest.fixture
def release_server() -> Iterator[ReleaseServer]:
    """The loopback GitHub fake (``tests/release_server.py``), started, with no releases yet."""
    from tests.release_server import ReleaseServer

    with ReleaseServer() as server:
        yield server


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    """A real OCI registry (``docker-registry``) on loopback, without auth (``tests/fleet/registry.py``)."""
    from tests.fleet.registry import Registry

    with Registry(tmp_path / "registry") as r:
        yield r


# -- keys -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def key() -> SecretKey:
    """A new minisign key pair (its secret key), one per test module."""
    from superfluid.manifest.minisign import generate

    return generate()


@pytest.fixture(scope="module")
def sigstore() -> SigstoreSimulator:
    """A Sigstore made in memory (``tests/installer/trust/sigstore_simulator.py``): a CA, a CT log and a
    transparency log, with the trusted root naming them; one per test module."""
    from tests.installer.trust.sigstore_simulator import SigstoreSimulator

    return SigstoreSimulator()


@pytest.fixture(scope="module")
def sigstore_root(sigstore: SigstoreSimulator, tmp_path_factory: pytest.TempPathFactory) -> Root:
    """``sigstore``'s trusted root, written to a file and loaded by the verifier (which imports sigstore)."""
    from superfluid.installer.trust.provenance import load_root

    return load_root(str(sigstore.write_root(tmp_path_factory.mktemp("root") / "trusted_root.json")))


@pytest.fixture
def sigstore_root_file(sigstore: SigstoreSimulator, tmp_path: Path) -> Path:
    """``sigstore``'s trusted root as a file: what SUPERFLUID_SIGSTORE_ROOT names."""
    return sigstore.write_root(tmp_path / "trusted_root.json")


# -- native artifacts --------------------------------------------------------------------------------


@pytest.fixture
def server(release_server: ReleaseServer, engines: Path) -> ReleaseServer:
    """The loopback server with the standard fixture releases of baseRT (0.2.6 … 0.5.0)."""
    from tests.end_to_end import releases

    releases.publish(release_server)
    return release_server


@pytest.fixture(scope="session")
def engines() -> Path:
    """``<cache>/basert``: one directory per variant of the reference engine holding its libbaseRT,
    and ``models/tiny.base``; built once (the build is skipped while its inputs are unchanged)."""
    from tests.basert.basert_helpers import build_engines

    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.fail("no C compiler (cc): the reference engine cannot be built")
    done = build_engines(native_cache())
    if done.returncode != 0:
        pytest.fail(f"tests/engines/basert/build.sh failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return native_cache() / "basert"


@pytest.fixture(scope="session")
def mirror(tmp_path_factory: pytest.TempPathFactory, engines: Path) -> Path:
    """A mirror folder (``installer.mirror``'s layout) of the standard fixture baseRT releases."""
    from tests.end_to_end import releases

    return releases.make_mirror(tmp_path_factory.mktemp("mirror") / "m")


def native_script(name: str) -> ModuleType:
    """``tests/native/<name>.py`` as a module, loaded once."""
    key = f"_sf_native_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, ROOT / "tests" / "native" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


def libllama(layout: str) -> Path:
    """The directory of the real libllama of ``layout`` (``v1``, ``v2``), built by
    ``tests/native/build_libllama.py`` into the native cache (about 80 s each on 2 cores the first
    time, then nothing while the pinned inputs are unchanged). Skipped only when the build itself
    cannot run here (no compiler, no cmake, no sdist), and never on CI (``CI`` set): there it fails."""
    build = native_script("build_libllama")
    try:
        return Path(build.build(layout))
    except build.BuildFailed as e:
        if os.environ.get("CI"):
            pytest.fail(f"building libllama {layout} failed on CI: {e}")
        pytest.skip(f"cannot build libllama {layout} here: {e}")


@pytest.fixture(scope="session")
def libllama_v1() -> Path:
    """The directory of the real v1 libllama (llama.cpp b11312)."""
    return libllama("v1")


@pytest.fixture(scope="session")
def libllama_v2() -> Path:
    """The directory of the real v2 libllama (llama.cpp b11549)."""
    return libllama("v2")


@pytest.fixture(scope="session", params=["v1", "v2"])
def libllama_each(request: pytest.FixtureRequest) -> Path:
    """The directory of each real libllama in turn."""
    return libllama(str(request.param))


@pytest.fixture(scope="session")
def gguf_models() -> dict[str, Path]:
    """The standard tiny GGUF models, by file name (``always-the.gguf``...)."""
    return dict(native_script("make_gguf").write_standard())


# -- checks ------------------------------------------------------------------------------------------


def printed_receipt(done: Run | subprocess.CompletedProcess[str], into: Path) -> dict[str, Any]:
    """The receipt a worker's ``install --into INTO`` answered, checked: exit 0, nothing on stderr,
    one line on stdout equal to ``INTO/runtime.json`` (written pretty, newline-terminated), and valid
    against ``schemas/runtime.schema.json``."""
    from superfluid.runtime.kernel.schema import errors

    assert (done.code if isinstance(done, Run) else done.returncode) == 0, done.stderr
    assert done.stderr == "" and done.stdout.count("\n") == 1
    printed = json.loads(done.stdout)
    text = (into / "runtime.json").read_text()
    written: dict[str, Any] = json.loads(text)
    assert printed == written and text.endswith("}\n")
    assert errors(written, "runtime") == []
    return written
