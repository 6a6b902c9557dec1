"""``superfluid/output``: aligned tables for people, indented JSON for machines, sizes in GB, and the
stable short name of each kind of failure."""

from __future__ import annotations

import pytest

from superfluid.installer.errors import DownloadStalled, HostUnreachable, VerificationError
from superfluid.runtime.kernel.errors import AbiRefused, BadFile, SuperfluidError, UsageError
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.output import counted, error_code, error_doc, gb, json_text, table
from superfluid.runtime.kernel.schema import errors


def test_table_pads_every_column_but_the_last() -> None:
    assert table(["ID", "STATE", "WHERE"], [["basert", "ready", "/h/runtimes/basert"], ["mlx", "-", ""]]) == (
        "ID      STATE  WHERE\n"
        "basert  ready  /h/runtimes/basert\n"
        "mlx     -\n")
    assert table(["A", "B"], []) == "A  B\n"
    assert table(["N"], [[3], [10]]) == "N\n3\n10\n"  # cells are text whatever they are given as


def test_json_text_is_indented_with_one_newline() -> None:
    assert json_text({"a": [1]}) == '{\n  "a": [\n    1\n  ]\n}\n'


@pytest.mark.parametrize(("n", "text"), [(None, "-"), (0, "-"), (1, "0.0 GB"), (49_999_999, "0.0 GB"),
                                         (50_000_000, "0.1 GB"), (4_200_000_000, "4.2 GB"), (1 << 40, "1099.5 GB")])
def test_gb(n: int | None, text: str) -> None:
    assert gb(n) == text


class _Private(BadFile):
    pass


@pytest.mark.parametrize(("error", "code"), [
    pytest.param(UsageError("x"), "usage", id="usage"),
    pytest.param(SuperfluidError("x"), "failed", id="the-base"),
    pytest.param(AbiRefused("/l", 2, 1), "abi-refused", id="abi-refused"),
    pytest.param(BadFile("/f", "x"), "bad-file", id="bad-file"),
    pytest.param(DownloadStalled("u", 1.0), "download-stalled", id="download-stalled"),
    pytest.param(HostUnreachable("u", "h", "d"), "host-unreachable", id="host-unreachable"),
    pytest.param(VerificationError("u", "size", "1", "2"), "verification", id="verification"),
    pytest.param(_Private("/f", "x"), "bad-file", id="private-class-is-its-base"),
    pytest.param(KeyboardInterrupt(), "interrupted", id="interrupted"),
    pytest.param(ValueError("x"), "value", id="another-exception"),
])
def test_error_code(error: BaseException, code: str) -> None:
    assert error_code(error) == code


def test_error_doc_is_the_error_schemas() -> None:
    fix = Fix.superfluid("runtime", "list", "basert", does="lists its installs")
    doc = error_doc("usage", "unknown flag --x", 2, fixes=[fix], advice="see --help")
    assert doc == {"error": {"code": "usage", "message": "unknown flag --x", "exit": 2,
                             "fix": "superfluid runtime list basert", "advice": "see --help",
                             "fixes": [{"argv": ["superfluid", "runtime", "list", "basert"],
                                        "does": "lists its installs"}]}}
    bad = error_doc("usage", "m", 2, fixes=[Fix(("`superfluid`",), "x")])
    assert errors(bad, "error") != []  # a backtick in fix is not the schema's
    assert "fix" not in error_doc("failed", "m", 1)["error"]
    assert errors(doc, "error") == [] and errors(error_doc("failed", "m", 1), "error") == []


@pytest.mark.parametrize(("n", "said"), [(0, "0 keys"), (1, "1 key"), (2, "2 keys")])
def test_a_count_says_its_noun_in_the_singular_only_for_one(n: int, said: str) -> None:
    """No "1 engines", no "key(s)" (issue 42, item 33)."""
    assert counted(n, "key") == said
    assert counted(n, "entry", "entries").endswith("entry" if n == 1 else "entries")
