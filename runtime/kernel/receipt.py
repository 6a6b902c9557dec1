"""The install receipt ``<install>/runtime.json``: written by the installer, read by the face and the daemon."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from superfluid.runtime.kernel.atomic import write_atomic
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads, read_bytes
from superfluid.runtime.kernel.layout import RECEIPT, worker_path  # RECEIPT: the receipt's file name in an install
from superfluid.runtime.kernel.schema import mark_valid, validate, validate_once

__all__ = [
    "SCHEMA",
    "RECEIPT",
    "ChosenBy",
    "Source",
    "Receipt",
    "LINK_W",
    "now_utc",
    "read_receipt",
    "write_receipt",
    "provenance_of",
]

#: the tag we write; a reader refuses another major
SCHEMA = "superfluid-runtime/1"
#: the most bytes a receipt is read of (ours are a few KiB: ~150 bytes a recorded file)
MAX_BYTES = 4 << 20
#: the Link W protocol versions our workers speak, as receipts record them (notes §2.3)
LINK_W = (8,)

ChosenBy = Literal["abi", "line", "tested", "pin", "untested", "from"]
_SCHEMA_TAG = re.compile(r"superfluid-runtime/(\d+)(?:\.\d+)*")


def now_utc() -> str:
    """The current time as the receipt writes it: ``2025-01-31T12:00:00Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass(frozen=True, slots=True)
class Source:
    """One fetched asset (or pip requirement): where it came from and the SHA-256 we computed."""

    url: str
    sha256: str = ""  # hex; empty only where no digest applies (an unpinned pip requirement)

    def to_json(self) -> dict[str, str]:
        return {"url": self.url, "sha256": self.sha256}


@dataclass(kw_only=True, frozen=True, slots=True)
class Receipt:
    """What an install is, how it was chosen and where its bytes came from."""

    id: str
    install: str  # the directory name, "<version>-<backend>"
    version: str
    backend: str
    worker: str  # "bin/superfluid-worker-<id>", relative to the install
    link_w: tuple[int, ...] = ()  # Link W protocol versions the installed worker speaks
    platforms: tuple[str, ...] = ()  # the host platform at install time, "<os>-<arch>"
    sources: tuple[Source, ...] = ()
    tested: bool = False  # absent reads as False (never as tested)
    abi: int | None = None  # the ABI number the staged library stated (basert)
    chosen_by: ChosenBy | None = None
    installed_at: str | None = None  # UTC, see now_utc()
    #: keys we do not know, kept so that a rewrite does not drop a newer writer's facts
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The receipt as written, keys in the daemon's order, then ours."""
        doc: dict[str, Any] = {
            "schema": SCHEMA,
            "id": self.id,
            "install": self.install,
            "version": self.version,
            "backend": self.backend,
            "link_w": list(self.link_w),
            "platforms": list(self.platforms),
            "worker": self.worker,
            "sources": [s.to_json() for s in self.sources],
            "tested": self.tested,
            "abi": self.abi,
            "chosen_by": self.chosen_by,
            "installed_at": self.installed_at,
        }
        for key, value in self.extra.items():
            doc.setdefault(key, value)
        return doc

    @classmethod
    def from_json(cls, data: Any, where: str = RECEIPT, *, raw: bytes | None = None) -> Receipt:
        """Build a receipt from parsed JSON read from ``where`` (``raw``: the bytes it was parsed
        from, whose schema check is then done once per content).

        Raises:
            BadFile: not an object, a ``schema`` tag of another major, a schema violation, or a
                worker that is not ``bin/superfluid-worker-<id>``; names ``where`` and the JSON path.
        """
        _check_schema_tag(data, where)
        if raw is not None:
            validate_once(data, raw, "runtime", where)
        else:
            validate(data, "runtime", where)
        if data["worker"] != worker_path(data["id"]):
            raise BadFile(where, f"names the worker {data['worker']!r}; an install of {data['id']} runs "
                          f"{worker_path(data['id'])!r}", json_path="$.worker")
        known = {f.name for f in fields(cls) if f.name != "extra"} | {"schema"}
        return cls(
            id=data["id"],
            install=data.get("install", data["version"]),
            version=data["version"],
            backend=data.get("backend", "unknown"),
            worker=data["worker"],
            link_w=tuple(data.get("link_w", ())),
            platforms=tuple(data.get("platforms", ())),
            sources=tuple(Source(s["url"], s.get("sha256", "")) for s in data.get("sources", ())),
            tested=data.get("tested", False),
            abi=data.get("abi"),
            chosen_by=data.get("chosen_by"),
            installed_at=data.get("installed_at"),
            extra={k: v for k, v in data.items() if k not in known},
        )


def provenance_of(extra: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a receipt's ``provenance`` (its keys beyond ours: ``Receipt.extra``) says of its install, in
    short, as ``runtimes`` and ``runtime list`` show it: ``proven`` (every asset was proven by its
    Sigstore bundle before it was staged), and the run that built the first one proven (``repository``,
    ``workflow``, ``ref``, ``commit``, ``run_url``; null when none was: "no provenance"). None when it
    records none (a receipt written before superfluid looked for bundles, a ``--from`` file)."""
    recorded = extra.get("provenance")
    assets = recorded.get("assets") if isinstance(recorded, Mapping) else None
    if not isinstance(assets, list):
        return None
    proven = [a["proven"] for a in assets if isinstance(a, Mapping) and isinstance(a.get("proven"), Mapping)]
    first: Mapping[str, Any] = proven[0] if proven else {}
    return {"proven": bool(assets) and len(proven) == len(assets),
            **{k: first.get(k) for k in ("repository", "workflow", "ref", "commit", "run_url")}}


def _check_schema_tag(data: Any, where: str) -> None:
    if not isinstance(data, dict):
        raise BadFile(where, f"is not a JSON object (it is a {type(data).__name__})", json_path="$")
    tag = data.get("schema")
    if tag is None:
        return  # the daemon writes no tag
    m = _SCHEMA_TAG.fullmatch(tag) if isinstance(tag, str) else None
    if m is None:
        raise BadFile(where, f"has the schema tag {tag!r}; expected {SCHEMA!r}", json_path="$.schema")
    if m.group(1) != "1":
        raise BadFile(where, f"is {tag}, a major version this superfluid does not read (it reads {SCHEMA})",
                      json_path="$.schema", advice="upgrade superfluid to read it")


def read_receipt(path: str | os.PathLike[str]) -> Receipt:
    """Read and validate the receipt at ``path``.

    Raises:
        BadFile: missing, not a regular file (a link, a FIFO, a device: never followed or waited on),
            larger than ``MAX_BYTES``, not strict UTF-8 JSON within the depth cap (with line and
            column), or not a valid receipt.
    """
    where = os.fspath(path)
    try:
        raw = read_bytes(where, max_bytes=MAX_BYTES)
        data = loads(raw, max_bytes=MAX_BYTES)
    except FileNotFoundError as e:
        raise BadFile(where, "does not exist (the install is incomplete)") from e
    except OSError as e:  # a link, a FIFO, a device, too large, unreadable: never followed or waited on
        raise BadFile(where, f"cannot be read: it {e.strerror or e}" if e.strerror and e.strerror.startswith("is ")
                      else f"cannot be read ({e.strerror or e})") from None
    except UntrustedJson as e:
        raise BadFile(where, e.fault if e.fault.startswith("is ") else f"is not read: {e.fault}") from None
    return Receipt.from_json(data, where, raw=raw)


def write_receipt(path: str | os.PathLike[str], receipt: Receipt) -> None:
    """Write ``receipt`` pretty-printed with a trailing newline: a temp file in the same directory,
    flushed to disk, then ``os.replace`` (a reader sees the old receipt or the new, never a part).

    Raises:
        OSError: the directory is not writable (the temp file is removed).
    """
    text = json.dumps(receipt.to_json(), indent=2) + "\n"
    write_atomic(path, text.encode("utf-8"), durable=True)
    mark_valid(text.encode("utf-8"), "runtime")  # made from a Receipt: read back, it needs no schema check
