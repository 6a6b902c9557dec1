"""``runtime/schema``: validation against ``schemas/`` with errors naming the file and JSON path, and
``validate_once``'s stamps in the home's cache, which skip validating bytes that passed before."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.schema import errors, load, mark_valid, validate, validate_once

BAD = [{"id": "x"}]  # a runtimes row without its other required keys


def test_errors_name_each_violation_by_json_path_in_path_order() -> None:
    assert errors([], "runtimes") == []
    assert errors({"id": 1}, "runtime") == ["$: 'version' is a required property",
                                            "$: 'worker' is a required property", "$.id: 1 is not of type 'string'"]
    assert errors(BAD, "runtimes")[0].startswith("$[0]: ")


def test_validate_raises_bad_file_naming_where_and_the_path() -> None:
    validate([], "runtimes", "runtimes.json")
    with pytest.raises(BadFile) as caught:
        validate({"id": 1}, "runtime", "/h/runtime.json")
    assert caught.value.path == "/h/runtime.json" and caught.value.json_path is not None
    assert str(caught.value).startswith("/h/runtime.json at $") and "does not match schema runtime" in str(caught.value)


def test_load_reads_the_shipped_schema() -> None:
    assert load("runtimes")["$schema"].endswith("2020-12/schema")
    with pytest.raises(FileNotFoundError):
        load("no-such-schema")


def _stamps(home: Path) -> list[str]:
    folder = home / "cache" / "validated"
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def test_validate_once_skips_bytes_that_passed(sf_home: Path) -> None:
    raw = b"[]"
    validate_once([], raw, "runtimes", "a.json")
    (stamp,) = _stamps(sf_home)
    assert stamp.startswith("runtimes-") and (sf_home / "cache" / "validated" / stamp).read_bytes() == b""
    # the same bytes again: not validated (the data given is not even looked at)
    validate_once(BAD, raw, "runtimes", "a.json")
    # other bytes: validated, refused, and not stamped
    with pytest.raises(BadFile, match="b.json at \\$\\[0\\]"):
        validate_once(BAD, json.dumps(BAD).encode(), "runtimes", "b.json")
    assert _stamps(sf_home) == [stamp]
    # the same bytes against another schema: validated
    with pytest.raises(BadFile, match="does not match schema runtime"):
        validate_once({"id": 1}, raw, "runtime", "c.json")


def test_a_stamp_that_is_a_link_is_no_stamp(sf_home: Path, tmp_path: Path) -> None:
    validate_once([], b"[]", "runtimes", "a.json")
    (stamp,) = _stamps(sf_home)
    path = sf_home / "cache" / "validated" / stamp
    path.unlink()
    (tmp_path / "elsewhere").write_bytes(b"")
    path.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(BadFile):
        validate_once(BAD, b"[]", "runtimes", "a.json")


def test_mark_valid_records_a_pass_without_validating(sf_home: Path) -> None:
    raw = json.dumps(BAD).encode()
    mark_valid(raw, "runtimes")
    validate_once(BAD, raw, "runtimes", "ours.json")  # what we wrote ourselves is read back unchecked
    assert len(_stamps(sf_home)) == 1


def test_no_stamp_can_be_written_costs_only_time(sf_home: Path) -> None:
    (sf_home / "cache").write_text("a file where the folder goes")
    validate_once([], b"[]", "runtimes", "a.json")
    with pytest.raises(BadFile):
        validate_once(BAD, json.dumps(BAD).encode(), "runtimes", "a.json")


def test_a_stamp_digest_is_blake2b_256_of_the_bytes() -> None:
    import hashlib

    from superfluid.runtime.kernel.schema import _digest

    assert _digest(b"abc") == hashlib.blake2b(b"abc", digest_size=32).hexdigest()
    assert _digest(b"abc") != _digest(b"abd") and len(_digest(b"")) == 64
