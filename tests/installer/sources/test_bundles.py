"""``installer/sources/bundles``: where an asset's Sigstore bundles are read, within bounds, as bytes to
verify later: a GitHub attestations answer, one bundle read whole, the bundle beside an asset in a mirror
folder. Each thing that is not a bundle to read is one row, refused and never taken for "none"."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from superfluid.installer.errors import DownloadError, OfflineMissing, ProvenanceRefused
from superfluid.installer.sources.bundles import (
    ANSWER_MAX,
    BUNDLE_DEPTH,
    BUNDLE_MAX,
    BUNDLES_EXAMINED,
    Attested,
    attestations,
    bundle_bytes,
    bundle_file,
    unless_absent,
)
from superfluid.installer.sources.github import GitHubClient
from superfluid.installer.sources.mirror import Mirror
from superfluid.installer.sources.oci.source import OciListing
from tests.installer.trust.sigstore_simulator import SigstoreSimulator

WHERE = "https://api.github.test/repos/o/r/attestations/sha256:00"


def _answer(*bundles: Any) -> bytes:
    return json.dumps({"attestations": [{"bundle": b, "repository_id": 1} for b in bundles]}).encode()


# -- a GitHub attestations answer ------------------------------------------------------------------------


def test_an_answer_is_its_bundles_each_as_its_own_json(sigstore: SigstoreSimulator) -> None:
    first, second = sigstore.sign(b"one"), sigstore.sign(b"one", dsse=False)
    got = attestations(_answer(first, second), WHERE)
    assert [json.loads(f.data) for f in got.found] == [first, second]
    assert [f.where for f in got.found] == [f"{WHERE} (attestation 1)", f"{WHERE} (attestation 2)"]
    assert (got.where, got.listed, got.cut) == (WHERE, 2, False)


def test_an_answer_of_none_is_no_bundle() -> None:
    got = attestations(b'{"attestations": []}', WHERE)
    assert (got.found, got.listed, got.cut) == ((), 0, False)


def test_a_long_answer_is_cut_to_the_bundles_examined_and_says_so() -> None:
    got = attestations(_answer(*({"n": n} for n in range(BUNDLES_EXAMINED + 3))), WHERE)
    assert [json.loads(f.data) for f in got.found] == [{"n": n} for n in range(BUNDLES_EXAMINED)]
    assert (got.listed, got.cut) == (BUNDLES_EXAMINED + 3, True)


def _nested(depth: int) -> Any:
    doc: Any = "leaf"
    for _ in range(depth):
        doc = {"x": doc}
    return doc


def test_a_bundle_may_nest_as_deep_as_the_cap() -> None:
    assert json.loads(attestations(_answer(_nested(BUNDLE_DEPTH)), WHERE).found[0].data) == _nested(BUNDLE_DEPTH)


@pytest.mark.parametrize(("body", "fragment"), [
    pytest.param(b"<html>rate limited</html>", "is not an attestations answer: it", id="not-json"),
    pytest.param(b"[]", "no list of attestations", id="a-list-not-an-object"),
    pytest.param(b'{"attestations": {"bundle": {}}}', "no list of attestations", id="attestations-not-a-list"),
    pytest.param(b'{"attestations": [{"bundle": {}}, {"bundle_url": "x"}]}',
                 "an attestation without a bundle (the second)", id="an-attestation-without-a-bundle"),
    pytest.param(b'{"attestations": [{"bundle": "e30="}]}', "without a bundle (the first)",
                 id="a-bundle-not-an-object"),
    pytest.param(_answer(_nested(BUNDLE_DEPTH + 1)), "is not an attestations answer: it", id="nested-too-deep"),
    pytest.param(b" " * (ANSWER_MAX + 1), "is not an attestations answer: it", id="larger-than-an-answer"),
])
def test_what_is_not_an_attestations_answer_is_refused(body: bytes, fragment: str) -> None:
    with pytest.raises(ProvenanceRefused, match=re.escape(fragment)) as e:
        attestations(body, WHERE)
    assert (e.value.named, e.value.step) == (WHERE, "bundle")


# -- one bundle read whole ---------------------------------------------------------------------------------


def test_a_bundle_read_whole_is_one_bundle_up_to_its_cap() -> None:
    data = b"{" + b" " * (BUNDLE_MAX - 2) + b"}"
    got = bundle_bytes(data, "blob")
    assert [(f.data, f.where) for f in got.found] == [(data, "blob")] and got.listed == 1
    with pytest.raises(ProvenanceRefused, match=f"larger than {BUNDLE_MAX} bytes .at least {BUNDLE_MAX + 1}.") as e:
        bundle_bytes(data + b" ", "blob")
    assert (e.value.named, e.value.step) == ("blob", "bundle")


# -- the bundle beside an asset in a mirror folder -------------------------------------------------------------


def test_the_bundle_beside_an_asset_is_read_and_none_is_no_bundle(tmp_path: Path) -> None:
    path = tmp_path / "engine.tar.gz.sigstore.json"
    path.write_bytes(b'{"mediaType": "x"}')
    got = bundle_file(str(path))
    assert [(f.data, f.where) for f in got.found] == [(b'{"mediaType": "x"}', str(path))] and got.listed == 1
    absent = bundle_file(str(tmp_path / "other.tar.gz.sigstore.json"))
    assert (absent.found, absent.where) == ((), str(tmp_path / "other.tar.gz.sigstore.json"))


def _link_out(path: Path) -> None:  # a link that leads out of the mirror folder, to a real bundle
    outside = path.parent.parent / "elsewhere.sigstore.json"
    outside.write_bytes(b"{}")
    os.symlink(outside, path)


def _fifo(path: Path) -> None:  # a writer that never writes: reading it would wait forever
    os.mkfifo(path)


def _directory(path: Path) -> None:
    path.mkdir()


def _too_large(path: Path) -> None:
    with path.open("wb") as f:
        f.truncate(BUNDLE_MAX + 1)


@pytest.mark.parametrize(("plant", "fragment"), [
    pytest.param(_link_out, "symbolic link, which is not followed", id="a-link-out-of-the-folder"),
    pytest.param(_fifo, "it is a FIFO", id="a-fifo"),
    pytest.param(_directory, "it is a directory", id="a-directory"),
    pytest.param(_too_large, f"larger than {BUNDLE_MAX} bytes", id="too-large"),
])
def test_what_is_beside_an_asset_and_no_bundle_file_is_refused(tmp_path: Path, plant: Callable[[Path], None],
                                                              fragment: str) -> None:
    folder = tmp_path / "mirror"
    folder.mkdir()
    path = folder / "engine.tar.gz.sigstore.json"
    plant(path)
    with pytest.raises(ProvenanceRefused, match=fragment) as e:
        bundle_file(str(path))
    assert (e.value.named, e.value.step) == (str(path), "bundle")
    assert "cannot be read as a Sigstore bundle" in e.value.fault


# -- who is asked ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", [GitHubClient, Mirror, OciListing], ids=["github", "mirror", "registry"])
def test_each_source_that_keeps_bundles_is_attested(source: type) -> None:
    assert issubclass(source, Attested)


def _raising(exc: Exception) -> Callable[[], bytes]:
    def ask() -> bytes:
        raise exc
    return ask


def test_unless_absent_answers_what_was_asked() -> None:
    assert unless_absent(lambda: b"answer") == b"answer"


@pytest.mark.parametrize("exc", [OfflineMissing("Sigstore bundle"),
                                 DownloadError("https://x/b", "not found", status=404)])
def test_unless_absent_takes_no_bundle_there_for_none(exc: Exception) -> None:
    assert unless_absent(_raising(exc)) is None


@pytest.mark.parametrize("status", [None, 403, 500])
def test_unless_absent_raises_any_other_fault(status: int | None) -> None:
    with pytest.raises(DownloadError):
        unless_absent(_raising(DownloadError("https://x/b", "refused", status=status)))
