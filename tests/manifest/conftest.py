"""The fixtures the manifest's tests share: this checkout's compat document, the trusted key of the
module's release folders, a fleet of four verified releases built from them, and an environment
without the manifest's variables."""

from __future__ import annotations

from typing import Any

import pytest

from superfluid.manifest.index import Index, build_index
from superfluid.manifest.keys import TrustedKey
from superfluid.manifest.minisign import SecretKey
from superfluid.manifest.sources import DirectorySource
from tests.manifest.release_folders import base_document, vary, write_release

#: the variables the manifest's command line reads paths and a source from
MANIFEST_VARIABLES = ("SUPERFLUID_MANIFEST_SOURCE", "SUPERFLUID_MANIFEST_KEYS", "SUPERFLUID_MANIFEST_TUF_REPO",
                      "SUPERFLUID_MANIFEST_TUF_KEYS", "SUPERFLUID_MANIFEST_EXPIRES")


@pytest.fixture
def no_manifest_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """This test's environment without the manifest's variables (a developer's shell may set them)."""
    for name in MANIFEST_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def trusted(key: SecretKey) -> list[TrustedKey]:
    """The module's minisign key, trusted."""
    return [TrustedKey(key.public(), "test.pub")]


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    """This checkout's compat document."""
    return base_document()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, doc: dict[str, Any], key: SecretKey,
          trusted: list[TrustedKey]) -> Index:
    """Four releases: 0.1.0 drives ABI 1 (unnumbered 0.3 line), 0.2.0 and 0.10.0 ABI 2 (no line),
    0.3.0 ABI 3; their llama.cpp builds differ; 0.10.0 ships no mlx."""
    root = tmp_path_factory.mktemp("fleet")
    write_release(root, "a", vary(doc, "0.1.0", builds=[("b11642", "v2"), ("b11284", "v1")]), key)
    write_release(root, "b", vary(doc, "0.2.0", abi=2, line=None, builds=[("b11669", "v2"), ("b11642", "v2")]), key)
    write_release(root, "c", vary(doc, "0.10.0", abi=2, line=None, builds=[("b11739", "v2")], drop=["mlx"]), key)
    write_release(root, "d", vary(doc, "0.3.0", abi=3, line=None, builds=[("b11739", "v2")], mlx=["0.33.0"]), key)
    return build_index(DirectorySource(root).snapshot(), trusted)
