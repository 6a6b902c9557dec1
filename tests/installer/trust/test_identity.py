"""``installer/trust/identity``: the workflow identity as a value, read from GitHub Actions'
``GITHUB_WORKFLOW_REF`` and from JSON, without importing the verifier (issue 46, item 5)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from superfluid.installer.trust import provenance
from superfluid.installer.trust.identity import Identity, identity, of_workflow_ref


@pytest.mark.parametrize(("workflow_ref", "expected"), [
    pytest.param("ggml-org/llama.cpp/.github/workflows/release.yml@refs/tags/b6000",
                 Identity("ggml-org/llama.cpp", ".github/workflows/release.yml", "refs/tags/b6000"), id="a-tag"),
    pytest.param("o/r/.github/workflows/release.yml@refs/heads/main",
                 Identity("o/r", ".github/workflows/release.yml", "refs/heads/main"), id="a-branch"),
    pytest.param("o/r/.github/workflows/ci@x.yml@refs/tags/v1",
                 None, id="an-at-in-the-path"),
    pytest.param("o/r/.github/workflows/release.yml", None, id="no-ref"),
    pytest.param("o/.github/workflows/release.yml@refs/tags/v1", None, id="no-name"),
    pytest.param("o/r@refs/tags/v1", None, id="no-path"),
    pytest.param("o/r/.github/workflows/release.yml@ ", None, id="empty-ref"),
    pytest.param("", None, id="empty"),
])
def test_the_identity_of_a_workflow_ref(workflow_ref: str, expected: Identity | None) -> None:
    if expected is None:
        with pytest.raises(ValueError):
            of_workflow_ref(workflow_ref)
    else:
        assert of_workflow_ref(workflow_ref) == expected


def test_from_json_reads_what_to_json_writes() -> None:
    for one in (Identity("o/r", ".github/workflows/release.yml", "refs/tags/v1"), Identity("o/r")):
        assert Identity.from_json(one.to_json()) == one
    assert Identity.from_json({"repository": "o/r", "workflow": "release.yml", "ref": None}) == \
        identity("o/r", "release.yml")


@pytest.mark.parametrize("doc", [
    pytest.param(None, id="null"),
    pytest.param(["o/r"], id="a-list"),
    pytest.param({"workflow": "release.yml"}, id="no-repository"),
    pytest.param({"repository": 7}, id="a-number"),
    pytest.param({"repository": "o/r", "ref": 1}, id="a-number-ref"),
    pytest.param({"repository": "o/r", "workflow": ["release.yml"]}, id="a-list-workflow"),
    pytest.param({"repository": "o/r/x"}, id="three-parts"),
    pytest.param({"repository": "o/r", "workflow": "../x.yml"}, id="dot-dot"),
])
def test_from_json_refuses_another_shape(doc: Any) -> None:
    with pytest.raises(ValueError):
        Identity.from_json(doc)


def test_the_verifier_answers_with_the_same_value() -> None:
    assert provenance.Identity is Identity and provenance.identity is identity


def test_naming_an_identity_does_not_import_the_verifier() -> None:
    code = ("import sys; import superfluid.installer.trust.identity; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sigstore', 'pydantic')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "[]"
