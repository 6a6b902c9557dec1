"""An OCI registry as a mirror: references, URLs, tags and the artifacts we push (pure rules).

See docs/fleet.md, "From the registry you already run".
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from superfluid.installer.transport.urls import is_loopback
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads

__all__ = [
    "SCHEME",
    "ARTIFACT_TYPE",
    "INDEX_TYPE",
    "FILE_TYPE",
    "MANIFEST_TYPE",
    "EMPTY_TYPE",
    "EMPTY_CONFIG",
    "TITLE",
    "OciRef",
    "Layer",
    "is_oci",
    "parse_ref",
    "ref_of_url",
    "engine_tag",
    "index_tag",
    "manifest",
    "parse_manifest",
    "ASSET_TYPE",
    "INDEX_MEDIA_TYPE",
    "asset_manifest",
    "referrer_manifest",
    "referrers_tag",
    "referrers_index",
    "parse_referrers",
    "Referrer",
]

SCHEME = "oci"
#: the ``artifactType`` of an engine install's manifest, and of a repository's index
ARTIFACT_TYPE = "application/vnd.superfluid.engine.v1"
INDEX_TYPE = "application/vnd.superfluid.releases.v1"
#: each file's layer media type: bytes we read as they are (never unpacked by a registry tool)
FILE_TYPE = "application/vnd.superfluid.file.v1"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
#: the OCI 1.1 empty config of an artifact: two bytes, ``{}``
EMPTY_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY_CONFIG = b"{}"
TITLE = "org.opencontainers.image.title"
#: the ``artifactType`` of one asset's own manifest: the subject its Sigstore bundle refers to
ASSET_TYPE = "application/vnd.superfluid.asset.v1"
#: an OCI image index: the referrers API's answer, and the referrers tag's document where there is no API
INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"

#: the most bytes of a manifest we read (distribution refuses larger ones than 4 MiB)
MANIFEST_MAX_BYTES = 4 << 20

# the distribution spec's repository name: lower-case path components, separated by . _ __ or -s
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
                   r"|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")
_TAG_BAD = re.compile(r"[^A-Za-z0-9_.-]")
_SHA256 = re.compile(r"sha256:([0-9a-f]{64})")
#: a mirror path's parts below the registry root: <owner>/<repo>/releases/download/<tag>/<name>
_MIRROR_PATH_PARTS = 6


def is_oci(where: str | None) -> bool:
    """Whether ``where`` (a ``--mirror`` value, a URL) names an OCI registry: ``oci://...``."""
    return bool(where) and str(where)[:6].lower() == "oci://"


def _loopback(host: str) -> bool:
    return is_loopback(f"http://{host}/")


@dataclass(frozen=True, slots=True)
class OciRef:
    """One repository of one registry: ``host`` (``name[:port]``, lower case) and ``repository``
    (``fleet/engines``); ``plain_http`` when it is spoken to over ``http://``."""

    host: str
    repository: str
    plain_http: bool = False

    @property
    def root(self) -> str:
        """``oci://HOST/REPO/``: the mirror root the lock's paths are joined to."""
        return f"oci://{self.host}/{self.repository}/"

    @property
    def api(self) -> str:
        """``https://HOST`` (or ``http://``): where the distribution API answers."""
        return f"{'http' if self.plain_http else 'https'}://{self.host}"

    def describe(self) -> str:
        return f"registry {self.host}/{self.repository}"

    def blob_url(self, sha256: str) -> str:
        return f"{self.api}/v2/{self.repository}/blobs/sha256:{sha256}"

    def manifest_url(self, reference: str) -> str:
        return f"{self.api}/v2/{self.repository}/manifests/{reference}"

    def upload_url(self) -> str:
        return f"{self.api}/v2/{self.repository}/blobs/uploads/"

    def path_of(self, url: str) -> str | None:
        """The path below ``root`` that ``url`` names (unquoted), or None when it is not below it."""
        if not url.lower().startswith(self.root.lower()):
            return None
        return unquote(url[len(self.root):].split("#", 1)[0].split("?", 1)[0])


def parse_ref(where: str, *, plain_http: bool = False, named_by: str = "--mirror") -> OciRef:
    """``oci://HOST[:PORT]/REPO`` as an ``OciRef``: HTTPS, or plain HTTP to a loopback host or
    when ``plain_http`` (``--plain-http``, ``FetchConfig.oci_plain_http``).

    Raises:
        ValueError: not such a reference (names the fault; a ``user:password@`` is never repeated).
    """
    given = f"{named_by}={where}" if named_by.isupper() else f"{named_by} {where}"  # a variable, or a flag
    if not is_oci(where):
        raise ValueError(f"{given}: not an oci://HOST/REPO reference")
    rest = where[len("oci://"):]
    netloc, _, path = rest.partition("/")
    if "@" in netloc:
        raise ValueError(f"{named_by}: an oci:// reference with credentials (user:password@) is refused: "
                         "registry credentials are read from the docker config (`docker login`) or REGISTRY_AUTH_FILE")
    repository = path.strip("/")
    if not _HOST.fullmatch(netloc):
        raise ValueError(f"{given}: {netloc!r} is not a registry host[:port]")
    if "?" in repository or "#" in repository or ":" in repository.rsplit("/", 1)[-1] or "@" in repository:
        raise ValueError(f"{given}: name the repository alone (no tag, digest, query): superfluid names "
                         "the tags it pushes and reads blobs by digest")
    if not repository or not _REPOSITORY.fullmatch(repository):
        raise ValueError(f"{given}: {repository!r} is not a repository name (lower-case path components "
                         "such as fleet/engines)")
    host = netloc.lower()
    return OciRef(host, repository, plain_http=plain_http or _loopback(host))


def ref_of_url(url: str, *, plain_http: bool = False) -> OciRef | None:
    """The registry an ``oci://HOST/REPO/<mirror path>`` URL (as a lock records it) is below, or
    None when ``url`` is no such URL (``plain_http`` as ``parse_ref``'s)."""
    if not is_oci(url):
        return None
    parts = urlsplit(url)
    segments = parts.path.strip("/").split("/")
    if len(segments) <= _MIRROR_PATH_PARTS:
        return None
    try:
        return parse_ref(f"oci://{parts.netloc}/{'/'.join(segments[:-_MIRROR_PATH_PARTS])}", plain_http=plain_http)
    except ValueError:
        return None


def _tag(raw: str) -> str:
    """A tag as the distribution spec allows it: ``[A-Za-z0-9_][A-Za-z0-9._-]{0,127}``."""
    tag = _TAG_BAD.sub("_", raw)
    if not tag[:1].isalnum():
        tag = "_" + tag
    return tag[:128]


def engine_tag(runtime: str, version: str, platform: str, backend: str) -> str:
    """The tag of an engine install's manifest: ``<runtime>-<version>-<platform>-<backend>``
    (``basert-0.4.0-linux-x64-cpu``; a character a tag cannot hold becomes ``_``)."""
    return _tag(f"{runtime}-{version}-{platform}-{backend}")


def index_tag(repo: str) -> str:
    """The tag of a repository's index: ``releases.<owner>.<repo>`` (an owner holds no ``.``, so
    two repositories never share one)."""
    owner, _, name = repo.partition("/")
    return _tag(f"releases.{owner}.{name}")


@dataclass(frozen=True, slots=True)
class Layer:
    """One file of a manifest: its title (a mirror path), SHA-256 and size."""

    title: str
    sha256: str
    size: int

    def descriptor(self) -> dict[str, Any]:
        return {"mediaType": FILE_TYPE, "digest": f"sha256:{self.sha256}", "size": self.size,
                "annotations": {TITLE: self.title}}


def manifest(layers: Sequence[Layer], *, artifact_type: str, annotations: Mapping[str, str]) -> bytes:
    """An OCI image manifest (1.1, an artifact) of ``layers``, in one stable rendering (sorted keys,
    no spaces): equal inputs give equal bytes, so a second push finds it in place by digest."""
    doc = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "artifactType": artifact_type,
        "config": {"mediaType": EMPTY_TYPE, "digest": f"sha256:{hashlib.sha256(EMPTY_CONFIG).hexdigest()}",
                   "size": len(EMPTY_CONFIG)},
        "layers": [layer.descriptor() for layer in layers],
        "annotations": dict(sorted(annotations.items())),
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")


def parse_manifest(data: bytes, where: str) -> list[Layer]:
    """The titled layers of a manifest a registry answered (layers without a title are skipped).

    Raises:
        BadFile: not a JSON image manifest, or a titled layer without a SHA-256 digest and a size.
    """
    try:
        doc = loads(data, max_bytes=MANIFEST_MAX_BYTES)
    except UntrustedJson as e:
        raise BadFile(where, f"is not a readable manifest ({e.fault})") from None
    layers = doc.get("layers") if isinstance(doc, dict) else None
    if not isinstance(layers, list):
        raise BadFile(where, "is not an OCI image manifest (no layers)", json_path="$.layers")
    out: list[Layer] = []
    for i, d in enumerate(layers):
        notes = d.get("annotations") if isinstance(d, dict) else None
        title = notes.get(TITLE) if isinstance(notes, dict) else None
        if not isinstance(title, str):
            continue
        m = _SHA256.fullmatch(str(d.get("digest")))
        size = d.get("size")
        if m is None or not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise BadFile(where, f"layer {title!r} has no sha256 digest and size", json_path=f"$.layers[{i}]")
        out.append(Layer(title, m.group(1), size))
    return out


# -- an asset's Sigstore bundle as a referrer of the asset (OCI 1.1, as cosign and gh attestation store them) --


def asset_manifest(layer: Layer) -> bytes:
    """The manifest of one asset alone (``artifactType`` ``ASSET_TYPE``, its one layer the asset's blob):
    the subject its bundle refers to. Its bytes follow from the asset's mirror path, digest and size
    alone, so a reader knows its digest without asking the registry."""
    return manifest([layer], artifact_type=ASSET_TYPE, annotations={})


def referrer_manifest(bundle_sha256: str, bundle_size: int, subject: bytes, *, bundle_type: str) -> bytes:
    """The manifest of a Sigstore bundle that refers to the manifest ``subject``: ``artifactType`` and its
    one layer ``bundle_type`` (the blob of ``bundle_sha256``), ``subject`` the asset's manifest."""
    doc = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "artifactType": bundle_type,
        "config": {"mediaType": EMPTY_TYPE, "digest": f"sha256:{hashlib.sha256(EMPTY_CONFIG).hexdigest()}",
                   "size": len(EMPTY_CONFIG)},
        "layers": [{"mediaType": bundle_type, "digest": f"sha256:{bundle_sha256}", "size": bundle_size}],
        "subject": {"mediaType": MANIFEST_TYPE, "digest": f"sha256:{hashlib.sha256(subject).hexdigest()}",
                    "size": len(subject)},
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")


def referrers_tag(subject_sha256: str) -> str:
    """The tag a registry without the referrers API holds a manifest's referrers under (OCI distribution
    1.1, "referrers tag schema"): ``sha256-<hex>``."""
    return f"sha256-{subject_sha256}"


@dataclass(frozen=True, slots=True)
class Referrer:
    """One referrer a referrers index names: its manifest's digest and size, and its ``artifactType``."""

    sha256: str
    size: int
    artifact_type: str

    def descriptor(self) -> dict[str, Any]:
        return {"mediaType": MANIFEST_TYPE, "digest": f"sha256:{self.sha256}", "size": self.size,
                "artifactType": self.artifact_type}


def referrers_index(referrers: Sequence[Referrer]) -> bytes:
    """The image index of ``referrers`` (the referrers tag's document), in one stable rendering."""
    doc = {"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": [r.descriptor() for r in referrers]}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")


def parse_referrers(data: bytes, where: str) -> list[Referrer]:
    """The referrers an image index names (the referrers API's answer, or the referrers tag's document),
    in its order; a descriptor that is not a SHA-256 manifest's is skipped.

    Raises:
        BadFile: not a JSON image index.
    """
    try:
        doc = loads(data, max_bytes=MANIFEST_MAX_BYTES)
    except UntrustedJson as e:
        raise BadFile(where, f"is not a readable image index ({e.fault})") from None
    listed = doc.get("manifests") if isinstance(doc, dict) else None
    if not isinstance(listed, list):
        raise BadFile(where, "is not an OCI image index (no manifests)", json_path="$.manifests")
    out: list[Referrer] = []
    for d in listed:
        m = _SHA256.fullmatch(str(d.get("digest"))) if isinstance(d, dict) else None
        size = d.get("size") if isinstance(d, dict) else None
        if m is None or not isinstance(size, int) or isinstance(size, bool) or size < 0:
            continue
        out.append(Referrer(m.group(1), size, str(d.get("artifactType") or "")))
    return out
