"""``--for VERSION`` asked of a static export of the manifest service (issue 25, items 12 and 13):
``SUPERFLUID_MANIFEST_URL`` a folder or a ``file://`` URL works as ``compat --service`` takes it,
checked through the export's TUF metadata or unchecked; a release the service rejected, or does
not have, is refused with the service's reason, never only "not found (HTTP 404)"."""

from __future__ import annotations

from pathlib import Path

import pytest

from superfluid.manifest import minisign
from tests import cli
from tests.end_to_end.conftest import Home
from tests.release_server import ReleaseServer


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A real export (``superfluid-manifest export --tuf-keys``) of releases 0.9.0 (ABI 2) and 0.8.0,
    and 0.2.1 whose document was changed after it was signed; and the release key's public file."""
    from tests.manifest.release_folders import base_document, vary, write_release

    base = tmp_path_factory.mktemp("export")
    key = minisign.generate()
    root = base / "releases"
    write_release(root, "0.9.0", vary(base_document(), "0.9.0", abi=2, line=None), key)
    write_release(root, "0.8.0", vary(base_document(), "0.8.0"), key)
    write_release(root, "0.2.1", vary(base_document(), "0.2.1"), key)
    for doc in (root / "0.2.1").glob("*.compat.json"):
        doc.write_bytes(doc.read_bytes().replace(b'"0.2.1"', b'"0.2.1" ', 1))  # no longer what was signed
    pub = base / "release.pub"
    pub.write_text(key.public().to_text())
    made = cli.run("superfluid-manifest", "keys", "init", base / "keys", timeout=60)
    assert made.code == 0, made.stderr
    done = cli.run("superfluid-manifest", "export", "--source", root, "--key", pub, "--tuf-keys", base / "keys",
                   base / "site")
    assert done.code == 0 and "(2 releases, 1 rejected)" in done.stdout, done.stderr
    return base / "site", pub


def _trust(site: Path, how: str) -> list[str]:
    return ["--insecure-no-freshness"] if how == "unchecked" else ["--trust-root", str(site / "metadata" /
                                                                                     "1.root.json")]


URLS = [pytest.param(lambda site: str(site), id="folder"), pytest.param(lambda site: site.as_uri(), id="file-url")]
TRUST = [pytest.param("tuf", id="tuf"), pytest.param("unchecked", id="unchecked")]


@pytest.mark.parametrize("how", TRUST)
@pytest.mark.parametrize("url", URLS)
def test_for_a_version_from_a_static_export(cli_home: Home, server: ReleaseServer, export: tuple[Path, Path],
                                            url, how: str) -> None:  # type: ignore[no-untyped-def]
    site, pub = export
    cli_home.env["SUPERFLUID_MANIFEST_URL"] = url(site)
    for version, expect in (("0.9.0", "0.5.0"), ("0.8.0", "0.4.0")):
        run = cli_home.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url, "--for", version,
                                  "--key", str(pub), "--dry-run", "--json", *_trust(site, how))
        assert run.code == 0, run.stderr
        first = run.json()["plans"][0]
        assert (first["version"], first["for"]["version"]) == (expect, version)
    assert "URLs are not fetched here" not in run.stderr


@pytest.mark.parametrize("how", TRUST)
@pytest.mark.parametrize(("version", "reason"), [
    pytest.param("0.2.1", "release 0.2.1 was rejected: ", id="rejected"),
    pytest.param("0.7.0", "no verified release 0.7.0 (verified: 0.9.0, 0.8.0)", id="unknown"),
])
def test_for_a_release_the_service_does_not_have_says_why(cli_home: Home, server: ReleaseServer,
                                                         export: tuple[Path, Path], how: str, version: str,
                                                         reason: str) -> None:
    site, pub = export
    cli_home.env["SUPERFLUID_MANIFEST_URL"] = str(site)
    run = cli_home.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url, "--for", version,
                              "--key", str(pub), "--dry-run", "--json", *_trust(site, how))
    assert run.code == 1, run.stderr
    error = run.json()["error"]
    assert error["code"] == "no-such-release" and f"--for {version}: {site.as_uri()}/: {reason}" in error["message"]
    if version == "0.2.1":
        assert "signature does not verify" in error["message"]
    assert "HTTP 404" not in run.stderr and "lists no signed answer" not in run.stderr
    assert not (cli_home.path / "runtimes").exists()


def test_a_path_that_is_no_folder_is_named(cli_home: Home, server: ReleaseServer, tmp_path: Path) -> None:
    cli_home.env["SUPERFLUID_MANIFEST_URL"] = str(tmp_path / "nowhere")
    run = cli_home.superfluid("runtime", "install", "basert", "--mirror", server.mirror_url, "--for", "0.9.0",
                              "--dry-run", "--insecure-no-freshness")
    assert run.code == 2, run.stderr
    assert f"SUPERFLUID_MANIFEST_URL {tmp_path / 'nowhere'}: no such directory" in run.stderr
