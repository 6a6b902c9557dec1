"""``manifest/command_line``: what the release tools' command lines share: a usage error is a typed
``UsageError`` pointing at ``--help`` (never argparse's exit), a flag's value is never empty, and a
tool's answer is a note on stderr and the files it wrote on stdout."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from superfluid.manifest.command_line import MAX_SECONDS, ManifestParser, integer, report_written, seconds
from superfluid.runtime.kernel.errors import UsageError


def _parser() -> ManifestParser:
    p = ManifestParser(prog="ci/tool")
    p.add_argument("--out", metavar="DIR")
    p.add_argument("--key", action="append", default=[])
    p.add_argument("--count", type=int)
    p.add_argument("name", nargs="?")
    return p


@pytest.mark.parametrize(("argv", "message"), [
    pytest.param(["--out", ""], "argument --out: needs DIR, not an empty string (see 'ci/tool --help')",
                 id="empty-value-named-by-its-metavar"),
    pytest.param(["--key", "a", "--key", ""], "argument --key: needs KEY, not an empty string (see 'ci/tool --help')",
                 id="empty-value-among-repeated"),
    pytest.param(["--count", "many"], "argument --count: invalid int value: 'many' (see 'ci/tool --help')",
                 id="argparse-own-error"),
    pytest.param(["--bogus"], "unrecognized arguments: --bogus (see 'ci/tool --help')", id="unknown-flag"),
    pytest.param(["--out"], "argument --out: expected one argument (see 'ci/tool --help')", id="missing-value"),
])
def test_a_bad_line_is_a_usage_error(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError) as refused:
        _parser().parse_args(argv)
    assert str(refused.value) == message


@pytest.mark.parametrize(("argv", "expected"), [
    pytest.param([], {"out": None, "key": [], "count": None, "name": None}, id="nothing"),
    pytest.param(["--out", "d", "--key", "a", "--key", "b", "x"], {"out": "d", "key": ["a", "b"], "count": None,
                                                                     "name": "x"}, id="every-flag"),
    pytest.param([""], {"out": None, "key": [], "count": None, "name": ""}, id="an-empty-positional-is-its-own"),
])
def test_a_good_line_parses_as_argparse_does(argv: list[str], expected: dict[str, object]) -> None:
    assert vars(_parser().parse_args(argv)) == expected


def test_known_args_leave_the_rest() -> None:
    args, rest = _parser().parse_known_args(["--out", "d", "--later"])
    assert args.out == "d" and rest == ["--later"]


def test_report_written_is_a_note_then_each_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [tmp_path / "a.tar.gz", "b.whl"]
    assert report_written("ci/pack", "signed with key ABC", files) == 0
    out, err = capsys.readouterr()
    assert err == "ci/pack: signed with key ABC\n"
    assert out == f"{tmp_path / 'a.tar.gz'}\nb.whl\n"


def test_report_written_of_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert report_written("ci/tool", "nothing to do", []) == 0
    assert capsys.readouterr() == ("", "ci/tool: nothing to do\n")


@pytest.mark.parametrize(("raw", "value"), [("0", 0), ("65535", 65535), (" 8750 ", 8750), ("+1", 1)],
                         ids=["low", "high", "spaces", "plus"])
def test_an_integer_in_range_is_read(raw: str, value: int) -> None:
    assert integer(0, 65535)(raw) == value


@pytest.mark.parametrize("raw", ["-1", "65536", "99999", "1e3", "1.5", "nan", "", "٣", "9" * 5000],
                         ids=["negative", "one-over", "huge", "exponent", "fraction", "nan", "empty", "not-ascii",
                              "endless-digits"])
def test_an_integer_out_of_range_names_the_range(raw: str) -> None:
    p = ManifestParser(prog="tool")
    p.add_argument("--port", type=integer(0, 65535))
    with pytest.raises(UsageError) as refused:
        p.parse_args(["--port", raw])
    assert str(refused.value) == (f"argument --port: expected an integer from 0 to 65535, not {raw!r} "
                                  "(see 'tool --help')")


@pytest.mark.parametrize(("raw", "value"), [("0", 0.0), ("0.5", 0.5), ("60", 60.0), (str(MAX_SECONDS), MAX_SECONDS)])
def test_seconds_in_range_are_read(raw: str, value: float) -> None:
    assert seconds(raw) == value


@pytest.mark.parametrize("raw", ["-5", "-0.1", "nan", "inf", "1e999", "31536001", "soon", ""],
                         ids=["negative", "negative-fraction", "nan", "inf", "overflow", "over-a-year", "words",
                              "empty"])
def test_seconds_out_of_range_are_refused(raw: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(f"from 0 to {MAX_SECONDS} (a year), not {raw!r}")):
        seconds(raw)
