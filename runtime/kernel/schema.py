"""Validation against the JSON Schemas in ``schemas/`` (draft 2020-12), errors naming file and path."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from superfluid import schemas
from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.home_cache import stamped, write
from superfluid.runtime.kernel.jsonread import loads
from superfluid.runtime.kernel.layout import cache_file, home

try:  # the interpreter's own BLAKE2b: hashlib loads OpenSSL at import, a tenth of a fast command's run
    from _blake2 import blake2b
except ImportError:  # an interpreter built without its own hashes: OpenSSL's SHA-256
    from hashlib import sha256

    def _digest(data: bytes) -> str:
        """A 256-bit digest of ``data`` in hex: SHA-256 where the build lacks BLAKE2b."""
        return sha256(data).hexdigest()
else:
    def _digest(data: bytes) -> str:
        """A 256-bit BLAKE2b digest of ``data`` in hex."""
        return blake2b(data, digest_size=32).hexdigest()

__all__ = ["load", "validate", "validate_once", "mark_valid", "errors"]

#: bytes of one schema read (ours are under 10 KiB)
_MAX_BYTES = 1 << 20


@cache
def load(name: str) -> dict[str, Any]:
    """The schema ``schemas/<name>.schema.json``."""
    with open(_schema_path(name), "rb") as f:
        data = f.read(_MAX_BYTES + 1)
    return loads(data, max_bytes=_MAX_BYTES)  # type: ignore[no-any-return]


def _schema_path(name: str) -> str:
    """``schemas/<name>.schema.json`` as a plain path (importlib.resources' readers import zipfile and
    tempfile, a cost on every run)."""
    return os.path.join(os.path.dirname(str(schemas.__file__)), f"{name}.schema.json")


def _path(error: Any) -> str:
    parts = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return "$" + parts


def _violations(data: Any, name: str) -> list[Any]:
    """The validator's errors, ordered by JSON path."""
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(load(name))
    return sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))


def errors(data: Any, name: str) -> list[str]:
    """Every violation as ``"$.json.path: message"`` (empty when valid)."""
    return [f"{_path(e)}: {e.message}" for e in _violations(data, name)]


def validate(data: Any, name: str, where: str) -> None:
    """Validate ``data`` (read from ``where``) against schema ``name``.

    Raises:
        BadFile: names ``where`` and the JSON path of the first violation.
    """
    error = next(iter(_violations(data, name)), None)
    if error is not None:
        raise BadFile(where, f"does not match schema {name}: {error.message}", json_path=_path(error))


def validate_once(data: Any, raw: bytes, name: str, where: str, *, shipped: bool = False) -> None:
    """``validate``, skipped when these exact bytes (``raw``, parsed as ``data``) passed against
    this schema before: a stamp named for their BLAKE2b digest and the schema's, in the home's
    ``cache/validated/``, records a pass (the schema library costs more than a fast command's whole
    run: runtimes --json computed is 4.13x a bare start with the stamps, 7.40x without; bench_cli).
    A file this package ships (``shipped``: a recipe) is also stamped where Python keeps this
    package's byte code, ``schemas/__pycache__/``, so that it is validated once per installation,
    not once per fresh home (whoever may write there may change the code itself). No stamp, or none
    that can be written: validated.

    Raises:
        BadFile: as ``validate``.
    """
    stamps = _stamps(raw, name, shipped)
    found = [s for s in stamps if stamped(s)]
    if not found:
        validate(data, name, where)
    for stamp in stamps:
        if stamp not in found:
            _touch(stamp)


def mark_valid(raw: bytes, name: str) -> None:
    """Record ``raw`` as valid against schema ``name`` without asking the schema library, as
    ``validate_once`` records a pass: for bytes this superfluid has just written from its own types
    (a receipt), which its tests hold to the schema, so that reading them back costs no validation."""
    _touch(_stamps(raw, name, False)[0])


def _stamps(raw: bytes, name: str, shipped: bool) -> list[str]:
    """Where a passed validation of ``raw`` against schema ``name`` is recorded: the home's stamp,
    then (``shipped``) the package's."""
    path = _schema_path(name)
    try:
        with open(path, "rb") as f:
            schema_text = f.read()
    except OSError:
        schema_text = b""
    digest = _digest(len(raw).to_bytes(8, "big") + raw + schema_text)
    stamps = [cache_file(home(), "validated", f"{name}-{digest}")]
    if shipped:
        stamps.append(os.path.join(os.path.dirname(path), "__pycache__", f"validated-{name}-{digest}"))
    return stamps


def _touch(stamp: str) -> None:
    """Write an (empty) stamp; one that cannot be written only costs time."""
    write(home(), stamp, b"")
