"""The receipt runtime.json (SPEC §5.4): round trip, the daemon's defaults (but absent `tested` is
false), and every broken file refused with its path and JSON path."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from superfluid.runtime.kernel.errors import BadFile
from superfluid.runtime.kernel.receipt import SCHEMA, Receipt, Source, now_utc, read_receipt, write_receipt

FULL = Receipt(
    id="llamacpp", install="b11284-cuda-13.4", version="b11284", backend="cuda-13.4",
    worker="bin/superfluid-worker-llamacpp", link_w=(8,), platforms=("linux-x64",),
    sources=(Source("https://example.invalid/llama-b11284-bin-ubuntu-cuda-13.4-x64.tar.gz", "a" * 64),
             Source("https://example.invalid/cudart-llama-b11284-bin-ubuntu-cuda-13.4-x64.tar.gz", "b" * 64)),
    tested=True, abi=None, chosen_by="tested", installed_at="2025-01-31T12:00:00Z",
)

# As the upstream daemon writes it (notes/superfluid-contract.md §2.3): no schema tag, none of ours.
DAEMON = {
    "id": "llamacpp", "install": "b11284-metal", "version": "b11284", "backend": "metal", "link_w": [8],
    "platforms": ["macos-arm64"], "worker": "bin/superfluid-worker-llamacpp",
    "sources": [{"url": "https://example.invalid/llama-b11284-bin-macos-arm64.tar.gz", "sha256": "f" * 64}],
    "tested": True,
}


def write(tmp_path: Path, doc: Any) -> Path:
    path = tmp_path / "runtime.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "runtime.json"
    write_receipt(path, FULL)
    assert read_receipt(path) == FULL
    text = path.read_text()
    assert text.endswith("}\n") and text.startswith("{\n  ")  # pretty, with a trailing newline
    doc = json.loads(text)
    assert list(doc)[:10] == ["schema", "id", "install", "version", "backend", "link_w", "platforms", "worker",
                              "sources", "tested"]
    assert doc["schema"] == SCHEMA and doc["tested"] is True and doc["abi"] is None
    assert [n for n in os.listdir(tmp_path)] == ["runtime.json"]  # the temp file is gone


def test_written_untested_says_so(tmp_path: Path) -> None:
    receipt = Receipt(id="basert", install="0.5.0-cpu", version="0.5.0", backend="cpu",
                      worker="bin/superfluid-worker-basert", abi=2, chosen_by="untested", installed_at=now_utc())
    write_receipt(tmp_path / "runtime.json", receipt)
    doc = json.loads((tmp_path / "runtime.json").read_text())
    assert doc["tested"] is False and doc["abi"] == 2 and doc["chosen_by"] == "untested"
    assert read_receipt(tmp_path / "runtime.json") == receipt


def test_daemon_receipt_reads(tmp_path: Path) -> None:
    got = read_receipt(write(tmp_path, DAEMON))
    assert got.install == "b11284-metal" and got.tested is True and got.abi is None and got.chosen_by is None


def test_absent_tested_reads_false(tmp_path: Path) -> None:
    doc = {k: v for k, v in DAEMON.items() if k != "tested"}
    assert read_receipt(write(tmp_path, doc)).tested is False


def test_minimal_receipt_takes_the_daemon_defaults(tmp_path: Path) -> None:
    got = read_receipt(write(tmp_path, {"id": "mlx", "version": "0.29.1", "worker": "bin/superfluid-worker-mlx"}))
    assert (got.install, got.backend, got.link_w, got.platforms, got.sources, got.tested) == \
        ("0.29.1", "unknown", (), (), (), False)


def test_source_without_sha256_reads_empty(tmp_path: Path) -> None:
    doc = {**DAEMON, "sources": [{"url": "https://pypi.invalid/simple mlx==0.29.1"}]}
    assert read_receipt(write(tmp_path, doc)).sources == (Source("https://pypi.invalid/simple mlx==0.29.1", ""),)


def test_unknown_keys_are_kept_on_rewrite(tmp_path: Path) -> None:
    path = write(tmp_path, {**DAEMON, "future": {"x": 1}})
    got = read_receipt(path)
    write_receipt(path, got)
    assert json.loads(path.read_text())["future"] == {"x": 1}


BROKEN = [
    pytest.param("{\n  \"id\": \"x\",\n", None, "not valid JSON at line 3", id="truncated-json"),
    pytest.param("", None, "not valid JSON at line 1", id="empty-file"),
    pytest.param([1, 2], "$", "is not a JSON object", id="not-an-object"),
    pytest.param({k: v for k, v in DAEMON.items() if k != "worker"}, "$", "'worker' is a required property",
                 id="missing-worker"),
    pytest.param({k: v for k, v in DAEMON.items() if k != "id"}, "$", "'id' is a required property",
                 id="missing-id"),
    pytest.param({**DAEMON, "schema": "superfluid-runtime/2"}, "$.schema", "a major version this superfluid does not",
                 id="unknown-schema-major"),
    pytest.param({**DAEMON, "schema": "something-else/1"}, "$.schema", "expected 'superfluid-runtime/1'",
                 id="foreign-schema-tag"),
    pytest.param({**DAEMON, "tested": "yes"}, "$.tested", "is not of type 'boolean'", id="tested-not-bool"),
    pytest.param({**DAEMON, "sources": [{"url": "u", "sha256": "XYZ"}]}, "$.sources[0].sha256", "does not match",
                 id="bad-digest"),
    pytest.param({**DAEMON, "sources": [{"sha256": "a" * 64}]}, "$.sources[0]", "'url' is a required property",
                 id="source-without-url"),
    pytest.param({**DAEMON, "link_w": ["8"]}, "$.link_w[0]", "is not of type 'integer'", id="link-w-strings"),
    pytest.param({**DAEMON, "chosen_by": "luck"}, "$.chosen_by", "is not one of", id="chosen-by-unknown"),
    pytest.param({**DAEMON, "abi": -1}, "$.abi", "less than the minimum", id="abi-negative"),
    pytest.param({**DAEMON, "install": "../evil"}, "$.install", "does not match", id="install-escapes"),
    pytest.param({**DAEMON, "worker": "/bin/sh"}, "$.worker", "does not match", id="worker-absolute"),
    pytest.param({**DAEMON, "worker": "bin/superfluid-worker-basert"}, "$.worker",
                 "an install of llamacpp runs 'bin/superfluid-worker-llamacpp'", id="worker-of-another-runtime"),
    pytest.param({**DAEMON, "installed_at": "yesterday"}, "$.installed_at", "does not match", id="bad-time"),
]


@pytest.mark.parametrize(("doc", "json_path", "fragment"), BROKEN)
def test_broken_receipt_names_file_and_path(tmp_path: Path, doc: Any, json_path: str | None, fragment: str) -> None:
    path = write(tmp_path, doc)
    with pytest.raises(BadFile, match=fragment) as info:
        read_receipt(path)
    assert info.value.path == str(path)
    assert info.value.json_path == json_path
    assert str(path) in str(info.value)


def test_missing_receipt(tmp_path: Path) -> None:
    with pytest.raises(BadFile, match="does not exist") as info:
        read_receipt(tmp_path / "runtime.json")
    assert info.value.fixes == ()  # the install's verdict names its repair (installs.judge)


def test_write_failure_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "runtime.json"
    target.mkdir()  # os.replace of a file over a directory fails
    with pytest.raises(OSError):
        write_receipt(target, FULL)
    assert sorted(os.listdir(tmp_path)) == ["runtime.json"]
    assert target.is_dir()
