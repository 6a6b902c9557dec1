"""A hint is a value (issue 42): ``Fix`` renders as a command a shell runs and knows its site (the
source flags a line gave: tests/end_to_end/test_source_hints.py)."""

from __future__ import annotations

import json
import shlex

from superfluid.runtime.kernel.errors import SuperfluidError
from superfluid.runtime.kernel.fixes import Fix, as_json, record_to, render, repair


def test_repair_names_the_install_and_its_site() -> None:
    fix = repair("basert", "0.4.0-cpu")
    assert fix.argv == ("superfluid", "runtime", "repair", "basert", "0.4.0-cpu")
    assert fix.command == "superfluid runtime repair basert 0.4.0-cpu"
    assert fix.site.startswith(f"{__name__}:")  # the caller, not the builder in fixes.py


def test_a_word_a_shell_splits_is_quoted() -> None:
    fix = Fix.superfluid("runtime", "install", "basert", "--mirror", "/tmp/a dir", does="installs it")
    assert shlex.split(fix.command) == list(fix.argv)
    assert render([fix]) == "`superfluid runtime install basert --mirror '/tmp/a dir'` installs it"
    doc = as_json([fix, repair("basert", "x")])
    assert doc["fix"] == fix.command and "`" not in doc["fix"]
    assert doc["fixes"][1] == {"argv": ["superfluid", "runtime", "repair", "basert", "x"],
                               "does": "puts it back"}
    assert as_json([]) == {}


def test_an_error_text_ends_in_its_advice_then_its_fixes() -> None:
    e = SuperfluidError("lost", fix=[repair("basert", "a"), Fix.superfluid("runtime", "remove", "basert", "a",
                                                                            does="removes it")],
                        advice="check the disk")
    assert str(e) == ("lost: check the disk; or `superfluid runtime repair basert a` puts it back; "
                      "or `superfluid runtime remove basert a` removes it")
    assert str(SuperfluidError("lost")) == "lost"


def test_the_log_holds_each_rendered_fix_with_its_site(tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "fixes.jsonl"
    record_to(str(log))
    try:
        render([repair("basert", "a")])
    finally:
        record_to(None)
    render([repair("basert", "b")])  # not recorded
    [one] = [json.loads(line) for line in log.read_text().splitlines()]
    assert one["argv"][-1] == "a" and one["site"].startswith(__name__)
    assert json.loads(log.read_text())["does"]
