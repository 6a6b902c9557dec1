"""``runtime/install_step``: the workers' ``install --into DIR --plan JSON`` line and plan, refused as
usage errors (``--plan: ...``) before any library is looked at. (The whole ``plan`` and ``install``
commands run as programs in ``tests/basert`` and ``tests/llamacpp``' ``test_worker_plan_install.py``.)"""

from __future__ import annotations

import json
from typing import Any

import pytest

from superfluid.runtime.install_step import parse_install, plan_of_json
from superfluid.runtime.kernel.errors import UsageError

SHA = "a" * 64
ASSET = {"name": "basert-engine-linux-x64-0.4.0.tar.gz", "url": "https://x.test/v0.4.0/b.tar.gz", "sha256": SHA}
GOOD: dict[str, Any] = {"id": "basert", "version": "0.4.0", "backend": "cpu", "install": "0.4.0-cpu",
                        "assets": [ASSET]}


DROP = object()  # a key left out


def text(**over: Any) -> str:
    doc = {**GOOD, **over}
    return json.dumps({k: v for k, v in doc.items() if v is not DROP})


@pytest.mark.parametrize(("argv", "want"), [
    pytest.param(["--into", "D", "--plan", "{}"], ("D", "{}"), id="in-order"),
    pytest.param(["--plan={}", "--into=D"], ("D", "{}"), id="either-order-with-equals"),
    pytest.param(["--into", "D"], "install needs --into and --plan", id="no-plan"),
    pytest.param(["--into=", "--plan", "{}"], "--into needs a value", id="empty-into"),
    pytest.param(["--into", "D", "--into", "E", "--plan", "{}"], "--into is given twice", id="twice"),
    pytest.param(["--into", "D", "--plan", "{}", "--force"], "unknown flag --force", id="unknown-flag"),
])
def test_parse_install(argv: list[str], want: tuple[str, str] | str) -> None:
    if isinstance(want, tuple):
        assert parse_install(argv) == want
    else:
        with pytest.raises(UsageError, match=want):
            parse_install(argv)


def test_a_minimal_plan() -> None:
    plan = plan_of_json(text(), "basert")
    assert (plan.id, plan.version, plan.backend, plan.install) == ("basert", "0.4.0", "cpu", "0.4.0-cpu")
    assert (plan.tested, plan.chosen_by, plan.abi, plan.why, plan.platform) == (False, "untested", None, "", "")
    assert (dict(plan.facts), plan.made_for) == ({}, None)
    (asset,) = plan.assets
    assert (asset.name, asset.url, asset.sha256, asset.size, asset.digest_source) == (
        ASSET["name"], ASSET["url"], SHA, None, "verified")


@pytest.mark.parametrize(("over", "want"), [
    pytest.param({"tested": True}, {"tested": True, "chosen_by": "tested"}, id="tested-absent-chosen-by"),
    pytest.param({"tested": True, "chosen_by": "abi", "abi": 1}, {"chosen_by": "abi", "abi": 1}, id="chosen-by"),
    pytest.param({"abi": 0}, {"abi": 0}, id="abi-zero"),
    pytest.param({"layout": "v2", "platform": "linux-x64", "why": "newest"},
                 {"facts": {"layout": "v2"}, "platform": "linux-x64", "why": "newest"}, id="layout-platform-why"),
    pytest.param({"for": {"release": "r", "version": "0.9.0"}}, {"made_for": {"release": "r", "version": "0.9.0"}},
                 id="for"),
    pytest.param({"assets": [{**ASSET, "sha256": SHA.upper()}]}, {}, id="upper-case-digest"),
])
def test_optional_keys(over: dict[str, Any], want: dict[str, Any]) -> None:
    plan = plan_of_json(text(**over), "basert")
    got = {k: (dict(v) if k in ("facts", "made_for") and v is not None else v) for k, v in
           ((k, getattr(plan, k)) for k in want)}
    assert got == want and plan.assets[0].sha256 == SHA


@pytest.mark.parametrize(("plan", "fragment"), [
    pytest.param("{", "not valid JSON", id="not-json"),
    pytest.param("[]", "not a JSON object (it is a list)", id="a-list"),
    pytest.param(text(id="llamacpp"), 'a plan for "llamacpp" given to the basert runtime', id="another-runtime"),
    pytest.param(text(id=DROP), "a plan for null given to the basert runtime", id="no-id"),
    pytest.param(text(version=DROP), "'version' must be a non-empty string (it is null)", id="no-version"),
    pytest.param(text(backend=""), "'backend' must be a non-empty string (it is \"\")", id="empty-backend"),
    pytest.param(text(install=7), "'install' must be a non-empty string (it is 7)", id="install-a-number"),
    pytest.param(text(tested="yes"), "'tested' must be true or false", id="tested-a-string"),
    pytest.param(text(chosen_by="whim"), "'chosen_by' \"whim\" is not one of abi, line, tested", id="chosen-by"),
    pytest.param(text(abi=True), "'abi' must be a non-negative integer or null (it is True)", id="abi-a-bool"),
    pytest.param(text(abi=-1), "(it is -1)", id="abi-negative"),
    pytest.param(text(abi="1"), "(it is '1')", id="abi-a-string"),
    pytest.param(text(layout=2), "'layout' must be a string", id="layout-a-number"),
    pytest.param(text(**{"for": ["r"]}), "'for' must be an object of strings", id="for-a-list"),
    pytest.param(text(**{"for": {"version": 9}}), "'for' must be an object of strings", id="for-not-strings"),
    pytest.param(text(assets=[]), "'assets' must be a non-empty list", id="no-assets"),
    pytest.param(text(assets={"name": "x"}), "'assets' must be a non-empty list", id="assets-an-object"),
    pytest.param(text(assets=["x"]), "assets[0] is not an object", id="asset-a-string"),
    pytest.param(text(assets=[ASSET, {**ASSET, "url": ""}]), "assets[1] has no 'url'", id="asset-without-url"),
    pytest.param(text(assets=[{**ASSET, "name": None}]), "assets[0] has no 'name'", id="asset-without-name"),
    pytest.param(text(assets=[{**ASSET, "sha256": "abc"}]), "has no 'sha256' of 64 hexadecimal digits (it has \"abc\")",
                 id="short-digest"),
    pytest.param(text(assets=[{**ASSET, "sha256": "sha256:" + SHA}]), "has no 'sha256' of 64", id="prefixed-digest"),
    pytest.param(text(install="0.4.0-cuda"), "'install' '0.4.0-cuda' is not '0.4.0-cpu', the name of 0.4.0 with "
                 "backend cpu", id="install-another-name"),
    pytest.param(text(version=".hidden", install=".hidden-cpu"), "'install' '.hidden-cpu' is not a name an install "
                 "can have", id="install-not-a-name"),
])
def test_a_bad_plan_is_a_usage_error(plan: str, fragment: str) -> None:
    with pytest.raises(UsageError) as caught:
        plan_of_json(plan, "basert")
    assert str(caught.value).startswith("--plan: ") and fragment in str(caught.value)
