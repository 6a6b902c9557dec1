"""`superfluid compat --release FILE|URL` reads and validates another release's compat document;
`manifest.compat` builds, validates and fills the tarball's digest."""

from __future__ import annotations

import hashlib
import http.server
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from superfluid.manifest.compat import build, parse, release_info, validate, with_tarball
from superfluid.runtime.kernel.errors import BadFile
from tests.declarations.conftest import base_env, sf, sf_json
from tests.threaded_server import serving


@pytest.fixture
def checkout_document(home: Path) -> dict:
    return sf_json(base_env(home), "compat", "--json")


def test_release_file_round_trips(home: Path, tmp_path: Path, checkout_document: dict) -> None:
    path = tmp_path / "superfluid-1.0.compat.json"
    path.write_text(json.dumps(with_tarball(checkout_document, str(_tarball(tmp_path)))))
    got = sf_json(base_env(home), "compat", "--release", str(path), "--json")
    assert got["release"]["tarball"] == "superfluid-1.0.tar.gz"
    assert got["runtimes"] == checkout_document["runtimes"]
    human = sf(base_env(home), "compat", "--release", str(path))
    assert human.code == 0 and "superfluid-1.0.tar.gz sha256 " in human.stdout


def _tarball(tmp_path: Path) -> Path:
    tarball = tmp_path / "superfluid-1.0.tar.gz"
    tarball.write_bytes(b"not really a tarball")
    return tarball


@pytest.mark.parametrize(("mutate", "fragment"), [
    pytest.param(lambda d: d.update(schema="superfluid-compat/2"),
                 "at $.schema: is a compat document of schema 'superfluid-compat/2'; this superfluid reads "
                 "superfluid-compat/1", id="unknown-major"),
    pytest.param(lambda d: d.pop("schema"), "at $.schema: has no compat schema tag", id="no-tag"),
    pytest.param(lambda d: d["runtimes"]["basert"].pop("requires"), "at $.runtimes.basert: does not match schema "
                 "compat: 'requires' is a required property", id="missing-key"),
    pytest.param(lambda d: d["runtimes"]["llamacpp"]["tested"][0].update(build=11642),
                 "at $.runtimes.llamacpp.tested[0].build", id="wrong-type"),
])
def test_release_file_refused(home: Path, tmp_path: Path, checkout_document: dict, mutate, fragment: str) -> None:
    mutate(checkout_document)
    path = tmp_path / "bad.compat.json"
    path.write_text(json.dumps(checkout_document))
    done = sf(base_env(home), "compat", "--release", str(path))
    assert done.code == 1
    assert f"superfluid: {path} {fragment}" in done.stderr and "Traceback" not in done.stderr


def test_release_minor_versions_and_unknown_keys_are_read(checkout_document: dict) -> None:
    checkout_document["schema"] = "superfluid-compat/1.3"
    checkout_document["signed_by"] = "someone"
    checkout_document["runtimes"]["newengine"] = {"options": []}
    assert validate(checkout_document, "x")["signed_by"] == "someone"


@pytest.mark.parametrize(("content", "fragment"), [
    pytest.param(b"{not json", "is not JSON", id="not-json"),
    pytest.param(b"[1, 2]", "is not a compat document (a JSON object)", id="array"),
])
def test_release_garbage_refused(home: Path, tmp_path: Path, content: bytes, fragment: str) -> None:
    path = tmp_path / "x.compat.json"
    path.write_bytes(content)
    done = sf(base_env(home), "compat", "--release", str(path))
    assert done.code == 1 and fragment in done.stderr


def test_release_missing_file(home: Path, tmp_path: Path) -> None:
    done = sf(base_env(home), "compat", "--release", str(tmp_path / "nope.json"))
    assert done.code == 2 and f"--release {tmp_path / 'nope.json'}: no such file or directory" in done.stderr


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "www"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **k):  # type: ignore[no-untyped-def]
            super().__init__(*a, directory=str(root), **k)

        def log_message(self, *a) -> None:  # type: ignore[no-untyped-def]
            pass

    with serving(http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)) as port:
        yield f"http://127.0.0.1:{port}", root


def test_release_url_over_loopback(home: Path, checkout_document: dict, served: tuple[str, Path]) -> None:
    base, root = served
    (root / "r.compat.json").write_text(json.dumps(checkout_document))
    got = sf_json(base_env(home), "compat", "--release", f"{base}/r.compat.json", "--json")
    assert got.pop("verification")["verdict"] == "unsigned"
    assert got == checkout_document
    done = sf(base_env(home), "compat", "--release", f"{base}/missing.compat.json")
    assert done.code == 1 and "404" in done.stderr


def test_with_tarball_fills_name_and_digest(tmp_path: Path) -> None:
    tarball = _tarball(tmp_path)
    doc = build(release_info("superfluid-toolchain", "1.0"), {"mlx": {"installs": [{"mlx": "1", "mlx_lm": "1",
                                                                                    "python": "3.12"}],
                                                                       "platforms": ["macos-arm64"], "options": []}})
    filled = with_tarball(doc, str(tarball))
    assert filled["release"] == {"name": "superfluid-toolchain", "version": "1.0", "tarball": "superfluid-1.0.tar.gz",
                                 "sha256": hashlib.sha256(b"not really a tarball").hexdigest()}
    assert doc["release"]["tarball"] is None  # the input is not changed
    assert parse(json.dumps(filled), "x")["release"]["sha256"] == filled["release"]["sha256"]
    with pytest.raises(BadFile, match="cannot be read"):
        with_tarball(doc, str(tmp_path / "absent.tar.gz"))
