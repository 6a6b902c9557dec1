"""``ci/engine-assets``: a baseRT release's assets from the reference engine's builds, the ABI asset
holding the number the library states; and an install by number from a mirror made of them
(SPEC §4.1, §5.3)."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests import cli
from tests.ci.conftest import ci_env, run_ci
from tests.end_to_end.releases import REPO, engine_lib, host_platform
from tests.release_server import ReleaseServer

pytestmark = pytest.mark.native


def _assets(tmp_path: Path, version: str, *extra: str, variant: str | None = None,
            out: str | None = None) -> tuple[subprocess.CompletedProcess[str], Path]:
    where = tmp_path / (out or f"v{version}")
    done = run_ci("engine-assets", "--lib", str(engine_lib(variant or version)), "--platform", host_platform(),
                  "--version", version, "--out", str(where), *extra, env=ci_env(), timeout=120)
    return done, where


@pytest.mark.parametrize(("version", "abi"), [
    pytest.param("0.4.0", 1, id="0.4.0-states-abi-1"),
    pytest.param("0.3.0", None, id="0.3.0-unnumbered"),
    pytest.param("0.5.0", 2, id="0.5.0-states-abi-2"),
    pytest.param("0.3.1", 1, id="0.3.1-states-abi-1"),
])
def test_assets_of_each_build(tmp_path: Path, version: str, abi: int | None) -> None:
    done, out = _assets(tmp_path, version)
    assert done.returncode == 0, done.stderr
    bundle = f"basert-engine-{host_platform()}-{version}.tar.gz"
    needs = [f"{bundle}.needs.json"] if host_platform().startswith("linux-") else []
    want = [bundle, f"{bundle}.sha256", *needs] + ([f"basert-engine-abi-{abi}.txt"] if abi is not None else [])
    assert [Path(line).name for line in done.stdout.splitlines()] == want
    assert sorted(p.name for p in out.iterdir()) == sorted(want)
    data = (out / bundle).read_bytes()
    assert (out / f"{bundle}.sha256").read_text() == f"{hashlib.sha256(data).hexdigest()}  {bundle}\n"
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        lib = engine_lib(version).name  # libbaseRT.so (.dylib on macOS), flat, as baseRT ships it
        member = tar.getmember(lib)
        assert member.isfile() and member.mode == 0o755 and tar.getnames() == [lib]
        extracted = tar.extractfile(member)
        assert extracted is not None and extracted.read() == engine_lib(version).read_bytes()
    if abi is not None:
        assert (out / f"basert-engine-abi-{abi}.txt").read_text() == f"{abi}\n"
        assert f"libbaseRT {version} states ABI {abi}" in done.stderr
    else:
        assert "states no ABI number (no ABI asset written)" in done.stderr


def test_the_bundle_is_reproducible(tmp_path: Path) -> None:
    first, a = _assets(tmp_path, "0.4.0", out="a")
    second, b = _assets(tmp_path, "0.4.0", out="b")
    assert first.returncode == second.returncode == 0
    assert {p.name: p.read_bytes() for p in a.iterdir()} == {p.name: p.read_bytes() for p in b.iterdir()}


def test_a_backend_is_named_in_the_bundle(tmp_path: Path) -> None:
    done, out = _assets(tmp_path, "0.4.0", "--backend", "cuda")
    assert done.returncode == 0, done.stderr
    assert (out / f"basert-engine-{host_platform()}-cuda-0.4.0.tar.gz").is_file()


@pytest.mark.parametrize(("version", "variant", "extra", "code", "fragment"), [
    pytest.param("0.4.1", "0.4.0", (), 1, "states version '0.4.0', and this release is '0.4.1'",
                 id="stated-version-differs"),
    pytest.param("0.4.0", "missing-symbol", (), 1, "not a baseRT library (libbaseRT at", id="missing-symbol"),
    pytest.param("0.4", "0.4.0", (), 2, "is not a baseRT bundle name an install reads", id="bad-version"),
    pytest.param("0.4.0", "0.4.0", ("--backend", "CUDA!"), 2, "a backend is lower-case letters", id="bad-backend"),
])
def test_refused(tmp_path: Path, version: str, variant: str, extra: tuple[str, ...], code: int,
                 fragment: str) -> None:
    done, out = _assets(tmp_path, version, *extra, variant=variant)
    assert done.returncode == code and fragment in done.stderr and "Traceback" not in done.stderr
    assert not out.exists() and done.stdout == ""


def test_refuses_to_overwrite_a_release(tmp_path: Path) -> None:
    assert _assets(tmp_path, "0.4.0")[0].returncode == 0
    done, _ = _assets(tmp_path, "0.4.0")
    assert done.returncode == 2 and "already holds" in done.stderr


def test_install_by_number_from_a_mirror_of_them(tmp_path: Path) -> None:
    """0.3.0 (unnumbered), 0.4.0 (ABI 1) and 0.5.0 (ABI 2), each written by ci/engine-assets: the
    install takes 0.4.0, by its ABI number, not the newer 0.5.0."""
    server = ReleaseServer()  # its state written as a mirror directory
    for version in ("0.3.0", "0.4.0", "0.5.0"):
        done, out = _assets(tmp_path, version)
        assert done.returncode == 0, done.stderr
        server.add_release(REPO, f"v{version}", {p.name: p.read_bytes() for p in sorted(out.iterdir())})
    mirror = server.write_mirror(tmp_path / "mirror")
    home = tmp_path / "home"
    home.mkdir()
    done = cli.run("superfluid", "runtime", "install", "basert", "--mirror", mirror, env=cli.environment(home),
                   timeout=300)
    assert done.code == 0, done.stderr
    receipt = json.loads((home / "runtimes" / "basert" / "current" / "runtime.json").read_text())
    assert (receipt["version"], receipt["abi"], receipt["chosen_by"], receipt["tested"]) == ("0.4.0", 1, "abi", True)
    assert "basert-engine-abi-1.txt" in done.stderr
