"""Forward compatibility of compat.json (issue 15, item 8): a newer release's document naming a
runtime this superfluid does not ship validates; the runtime is kept as given and shown as unknown,
never refused. The runtimes this superfluid knows are still held to their shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from superfluid.installer.trust.identity import Identity
from superfluid.manifest.compat import attested_by, parse, unknown_runtimes, validate, with_attestation
from superfluid.runtime.kernel.errors import BadFile
from tests import cli

#: what a newer release might say about an engine this one has never heard of: other keys, other
#: option types, no options at all
VLLM = {"engines": [{"version": "0.9.1", "cuda": "12.8"}],
        "options": [{"name": "tensor-parallel", "type": "ratio", "description": "a type we do not know"}]}
SGLANG: dict[str, Any] = {}


@pytest.fixture(scope="module")
def ours() -> dict[str, Any]:
    done = cli.run("superfluid", "compat", "--json")
    assert done.code == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _newer(ours: dict[str, Any], **extra: Any) -> dict[str, Any]:
    doc = json.loads(json.dumps(ours))
    doc["schema"] = "superfluid-compat/1.3"  # a newer minor: only adds keys
    doc["release"]["version"] = "9.0.0"
    doc["runtimes"].update(extra)
    return doc


def test_an_unknown_runtime_validates_and_is_named(ours: dict[str, Any]) -> None:
    doc = _newer(ours, vllm=VLLM, sglang=SGLANG)
    got = parse(json.dumps(doc), "newer.compat.json")
    assert got["runtimes"]["vllm"] == VLLM and got["runtimes"]["sglang"] == {}  # kept as given
    assert unknown_runtimes(got) == ["vllm", "sglang"]
    assert unknown_runtimes(ours) == []


@pytest.mark.parametrize(("runtime_id", "part", "path"), [
    ("basert", {"installs": []}, "$.runtimes.basert"),  # no requires
    ("llamacpp", {"tested": "b11642", "options": []}, "$.runtimes.llamacpp.tested"),
    ("vllm", ["not", "an", "object"], "$.runtimes.vllm"),
])
def test_what_is_still_refused(ours: dict[str, Any], runtime_id: str, part: Any, path: str) -> None:
    with pytest.raises(BadFile) as e:
        validate(_newer(ours, **{runtime_id: part}), "newer.compat.json")
    assert e.value.json_path is not None and e.value.json_path.startswith(path)


def _compat_release(tmp_path: Path, doc: dict[str, Any], *flags: str) -> cli.Run:
    path = tmp_path / "superfluid-9.0.0.compat.json"
    path.write_text(json.dumps(doc, indent=2))
    return cli.run("superfluid", "compat", "--release", path, *flags, env=cli.environment(tmp_path / "home"))


def test_compat_release_shows_an_unknown_runtime_as_unknown(tmp_path: Path, ours: dict[str, Any]) -> None:
    done = _compat_release(tmp_path, _newer(ours, vllm=VLLM))
    assert done.code == 0, done.stderr  # unsigned: read with a warning, not refused
    assert "vllm: unknown (a runtime this superfluid does not ship; kept as the document gives it: engines, " \
           "options)" in done.stdout
    assert "basert: drives baseRT ABI 1" in done.stdout


def test_compat_release_json_keeps_it_and_lists_it(tmp_path: Path, ours: dict[str, Any]) -> None:
    done = _compat_release(tmp_path, _newer(ours, vllm=VLLM), "--json")
    assert done.code == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["runtimes"]["vllm"] == VLLM and doc["unknown_runtimes"] == ["vllm"]
    from superfluid.runtime.kernel.schema import errors

    assert errors(doc, "compat") == []


# -- the workflow a release states attests it (issue 46, item 5) ------------------------------------

_RELEASE_WORKFLOW = {"repository": "acme/superfluid", "workflow": ".github/workflows/release.yml",
                     "ref": "refs/tags/v0.4.0"}


@pytest.mark.parametrize(("stated", "fault"), [
    pytest.param(_RELEASE_WORKFLOW, None, id="a-run"),
    pytest.param(..., None, id="none-stated"),
    pytest.param({**_RELEASE_WORKFLOW, "ref": None}, "without its workflow or ref", id="no-ref"),
    pytest.param({**_RELEASE_WORKFLOW, "workflow": None}, "without its workflow or ref", id="no-workflow"),
    pytest.param({**_RELEASE_WORKFLOW, "repository": "acme"}, "is not OWNER/NAME", id="no-owner"),
    pytest.param("acme/superfluid", "an identity is an object", id="a-string"),
])
def test_the_workflow_a_document_states_attests_it(ours: dict[str, Any], stated: Any, fault: str | None) -> None:
    doc = json.loads(json.dumps(ours))
    if stated is not ...:
        doc["release"]["attested_by"] = stated
    if fault is not None:
        with pytest.raises(BadFile, match=fault) as refused:
            attested_by(doc, "r.compat.json")
        assert refused.value.json_path == "$.release.attested_by"
    elif stated is ...:
        assert attested_by(doc, "r.compat.json") is None
    else:
        assert attested_by(doc, "r.compat.json") == Identity.from_json(stated)
        assert with_attestation(ours, Identity.from_json(stated)) == doc and validate(doc, "r") == doc
