"""Validation against the JSON Schemas in ``schemas/`` (draft 2020-12), errors naming file and path."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from superfluid.runtime.errors import BadFile

__all__ = ["load", "validate", "errors"]


@cache
def load(name: str) -> dict[str, Any]:
    """The schema ``schemas/<name>.schema.json``."""
    text = (resources.files("superfluid.schemas") / f"{name}.schema.json").read_text(encoding="utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


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
