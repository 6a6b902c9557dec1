"""The OCI client's rules (installer/sources/oci/ref.py) as tables: references, tags, manifests. Logins and
challenges are tests/installer/sources/oci/test_auth.py, the fetcher tests/installer/sources/oci/test_client.py."""

from __future__ import annotations

import hashlib
import json

import pytest

from superfluid.installer.sources.oci.ref import (
    Layer,
    engine_tag,
    index_tag,
    manifest,
    parse_manifest,
    parse_ref,
    ref_of_url,
)
from superfluid.runtime.kernel.errors import BadFile

# -- references ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("where", "host", "repository", "api"), [
    pytest.param("oci://127.0.0.1:5000/fleet/engines", "127.0.0.1:5000", "fleet/engines", "http://127.0.0.1:5000",
                 id="loopback-plain-http"),
    pytest.param("oci://localhost/x", "localhost", "x", "http://localhost", id="localhost"),
    pytest.param("OCI://Registry.Example/team/sub/engines/", "registry.example", "team/sub/engines",
                 "https://registry.example", id="remote-https-trailing-slash"),
    pytest.param("oci://[::1]:5000/a-b/c__d", "[::1]:5000", "a-b/c__d", "http://[::1]:5000", id="ipv6"),
])
def test_a_reference(where: str, host: str, repository: str, api: str) -> None:
    ref = parse_ref(where)
    assert (ref.host, ref.repository, ref.api) == (host, repository, api)
    assert ref.root == f"oci://{host}/{repository}/"


@pytest.mark.parametrize(("where", "fault"), [
    pytest.param("https://registry.example/x", "not an oci://", id="another-scheme"),
    pytest.param("oci://registry.example", "not a repository name", id="no-repository"),
    pytest.param("oci://registry.example/Fleet", "not a repository name", id="upper-case"),
    pytest.param("oci://registry.example/fleet:latest", "no tag", id="a-tag"),
    pytest.param("oci://registry.example/fleet@sha256:00", "no tag", id="a-digest"),
    pytest.param("oci://bad_host/fleet", "not a registry host", id="bad-host"),
    pytest.param("oci://user:s3cret@registry.example/fleet", "credentials", id="credentials"),
])
def test_a_bad_reference(where: str, fault: str) -> None:
    with pytest.raises(ValueError, match=fault) as e:
        parse_ref(where)
    assert "s3cret" not in str(e.value)


def test_plain_http_to_another_host_only_when_asked() -> None:
    assert parse_ref("oci://registry.example/x").api == "https://registry.example"
    assert parse_ref("oci://registry.example/x", plain_http=True).api == \
        "http://registry.example"


def test_the_registry_of_a_locked_url() -> None:
    url = "oci://127.0.0.1:5000/fleet/engines/basecompute/baseRT/releases/download/v0.4.0/x.tar.gz"
    ref = ref_of_url(url)
    assert ref is not None and ref.repository == "fleet/engines"
    assert ref.path_of(url) == "basecompute/baseRT/releases/download/v0.4.0/x.tar.gz"
    assert ref_of_url("https://github.com/a/b/releases/download/t/n") is None


@pytest.mark.parametrize(("parts", "tag"), [
    (("basert", "0.4.0", "linux-x64", "cpu"), "basert-0.4.0-linux-x64-cpu"),
    (("llamacpp", "b11642", "linux-x64", "cuda-13.4"), "llamacpp-b11642-linux-x64-cuda-13.4"),
    (("x", "1.0+local", "linux-x64", "cpu"), "x-1.0_local-linux-x64-cpu"),
])
def test_an_engine_tag(parts: tuple[str, str, str, str], tag: str) -> None:
    assert engine_tag(*parts) == tag


def test_an_index_tag_per_repository() -> None:
    assert index_tag("basecompute/baseRT") == "releases.basecompute.baseRT"
    assert index_tag("ggml-org/llama.cpp") == "releases.ggml-org.llama.cpp"


# -- manifests ----------------------------------------------------------------------------------------


def test_a_manifest_is_stable_and_read_back() -> None:
    layers = [Layer("a/b/releases/download/t/x.tar.gz", "ab" * 32, 10), Layer("a/b/releases.json", "cd" * 32, 2)]
    one = manifest(layers, artifact_type="application/vnd.superfluid.engine.v1", annotations={"b": "2", "a": "1"})
    two = manifest(layers, artifact_type="application/vnd.superfluid.engine.v1", annotations={"a": "1", "b": "2"})
    assert one == two
    doc = json.loads(one)
    assert doc["config"]["digest"] == "sha256:" + hashlib.sha256(b"{}").hexdigest()
    assert doc["layers"][0]["annotations"] == {"org.opencontainers.image.title": layers[0].title}
    assert parse_manifest(one, "m") == layers


@pytest.mark.parametrize(("doc", "fault"), [
    pytest.param(b"not json", "not a readable manifest", id="not-json"),
    pytest.param(b'{"schemaVersion": 2}', "no layers", id="no-layers"),
    pytest.param(json.dumps({"layers": [{"digest": "md5:00", "size": 1,
                                         "annotations": {"org.opencontainers.image.title": "x"}}]}).encode(),
                 "no sha256 digest", id="another-digest"),
    pytest.param(json.dumps({"layers": [{"digest": "sha256:" + "0" * 64, "size": -1,
                                         "annotations": {"org.opencontainers.image.title": "x"}}]}).encode(),
                 "no sha256 digest and size", id="negative-size"),
])
def test_a_broken_manifest(doc: bytes, fault: str) -> None:
    with pytest.raises(BadFile, match=fault):
        parse_manifest(doc, "m")
