"""``manifest/pack``'s rules, in process and without building: the three files beside an artifact
(its ``.sha256``, its ``.compat.json`` naming it, and that document's signature, which verifies),
the children's environment without the signing key, ``SOURCE_DATE_EPOCH``, a failed child shown by
its tail, the wheel's version against its document's, and an output folder that must be empty.
(``ci/pack`` end to end, building real artifacts and checking them with ``sha256sum`` and
``minisign``, and its refusals as the workflow sees them, is ``tests/ci/test_pack.py``.)"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from superfluid.installer.trust.identity import Identity
from superfluid.manifest.compat import attested_by, parse
from superfluid.manifest.minisign import SecretKey, parse_signature, verify
from superfluid.manifest.pack import (
    PackError,
    _check_out,
    _check_version,
    _child_env,
    _run,
    _sidecars,
    _timestamp,
    attesting_workflow,
    main,
)
from superfluid.manifest.release_files import file_sha256
from superfluid.manifest.settings import ENV_KEY, ENV_KEY_FILE, ENV_WORKFLOW_REF, read_settings
from superfluid.runtime.kernel.errors import UsageError

ARTIFACT = "superfluid_toolchain-0.1.0.tar.gz"


@pytest.fixture
def artifact(tmp_path: Path) -> Path:
    path = tmp_path / ARTIFACT
    path.write_bytes(b"an sdist's bytes\n")
    return path


def test_sidecars_signed(artifact: Path, doc: dict[str, Any], key: SecretKey) -> None:
    written = _sidecars(artifact, doc, key, 1_700_000_000)
    assert [p.name for p in written] == [f"{ARTIFACT}.sha256", f"{ARTIFACT}.compat.json",
                                         f"{ARTIFACT}.compat.json.minisig"]
    digest = file_sha256(artifact)
    assert written[0].read_text() == f"{digest}  {ARTIFACT}\n"
    body = written[1].read_bytes()
    document = parse(body, written[1].name)
    assert (document["release"]["tarball"], document["release"]["sha256"]) == (ARTIFACT, digest)
    assert document["runtimes"] == doc["runtimes"] and body.endswith(b"}\n")
    signature = parse_signature(written[2].read_text(), written[2].name)
    assert verify(body, signature, [key.public()], where=written[1].name) == key.public()
    assert signature.trusted_comment == f"timestamp:1700000000\tfile:{ARTIFACT}.compat.json\thashed"


WORKFLOW = Identity("acme/superfluid", ".github/workflows/release.yml", "refs/tags/v0.1.0")


def test_sidecars_state_the_attesting_workflow_under_the_signature(artifact: Path, doc: dict[str, Any],
                                                                    key: SecretKey) -> None:
    _, compat, minisig = _sidecars(artifact, doc, key, 1_700_000_000, WORKFLOW)
    body = compat.read_bytes()
    document = parse(body, compat.name)  # the schema holds it
    assert document["release"]["attested_by"] == WORKFLOW.to_json()
    assert attested_by(document, compat.name) == WORKFLOW
    assert document["release"]["sha256"] == file_sha256(artifact)
    assert verify(body, parse_signature(minisig.read_text(), minisig.name), [key.public()], where=compat.name)
    unstated = _sidecars(artifact, doc, None, 0)[1]
    assert "attested_by" not in parse(unstated.read_bytes(), unstated.name)["release"]


@pytest.mark.parametrize(("workflow_ref", "expected"), [
    pytest.param("acme/superfluid/.github/workflows/release.yml@refs/tags/v0.1.0", WORKFLOW, id="a-tag-push"),
    pytest.param(" acme/superfluid/.github/workflows/release.yml@refs/tags/v0.1.0\n", WORKFLOW, id="stripped"),
])
def test_the_attesting_workflow_is_github_actions_own(workflow_ref: str, expected: Identity) -> None:
    assert attesting_workflow(read_settings({ENV_WORKFLOW_REF: workflow_ref})) == expected


@pytest.mark.parametrize(("workflow_ref", "fragment"), [
    pytest.param(None, "--attested: GITHUB_WORKFLOW_REF is unset", id="not-in-actions"),
    pytest.param("", "--attested: GITHUB_WORKFLOW_REF is unset", id="empty"),
    pytest.param("acme/superfluid@refs/tags/v1", "--attested: GITHUB_WORKFLOW_REF 'acme/superfluid@refs/tags/v1' "
                 "is not OWNER/NAME/.github/workflows/FILE@REF", id="no-workflow"),
])
def test_attested_outside_the_attesting_workflow_exits_2_before_anything_is_built(
        workflow_ref: str | None, fragment: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(ENV_KEY, raising=False)
    monkeypatch.delenv(ENV_KEY_FILE, raising=False)
    if workflow_ref is None:
        monkeypatch.delenv(ENV_WORKFLOW_REF, raising=False)
    else:
        monkeypatch.setenv(ENV_WORKFLOW_REF, workflow_ref)
    assert main(["--out", str(tmp_path / "dist"), "--unsigned", "--attested"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("ci/pack: ") and fragment in err and out == ""
    assert not (tmp_path / "dist").exists()


def test_sidecars_unsigned(artifact: Path, doc: dict[str, Any]) -> None:
    written = _sidecars(artifact, doc, None, 0)
    assert [p.name for p in written] == [f"{ARTIFACT}.sha256", f"{ARTIFACT}.compat.json"]
    assert sorted(p.name for p in artifact.parent.iterdir()) == sorted([ARTIFACT, *(p.name for p in written)])


def test_the_children_never_see_the_signing_key() -> None:
    environ = {ENV_KEY: "secret", ENV_KEY_FILE: "/k/minisign.key", "PATH": "/usr/bin", "SOURCE_DATE_EPOCH": "1"}
    assert _child_env(environ) == {"PATH": "/usr/bin", "SOURCE_DATE_EPOCH": "1"}


@pytest.mark.parametrize(("value", "fixed"), [
    pytest.param("1700000000", 1_700_000_000, id="set"),
    pytest.param("0", 0, id="the-epoch"),
    pytest.param("", None, id="empty"),
    pytest.param("-5", None, id="negative"),
    pytest.param("soon", None, id="not-a-number"),
])
def test_source_date_epoch_fixes_the_timestamp(value: str, fixed: int | None) -> None:
    before = int(time.time())
    got = _timestamp(value)
    assert got == fixed if fixed is not None else before <= got <= int(time.time())


def test_a_child_that_fails_is_shown_by_its_tail() -> None:
    script = "import sys\nfor n in range(40): print(f'line {n}', file=sys.stderr)\nsys.exit(3)"
    with pytest.raises(PackError) as failed:
        _run([sys.executable, "-c", script], env=os.environ, timeout=60, what="the step")
    message = str(failed.value)
    assert message.startswith("the step failed (exit 3):\nline 10\n") and message.endswith("line 39")
    assert "line 9\n" not in message


@pytest.mark.parametrize(("argv", "timeout", "fragment"), [
    pytest.param(["/nonexistent/tool"], 60.0, "the step failed: [Errno 2]", id="cannot-start"),
    pytest.param([sys.executable, "-c", "import time; time.sleep(30)"], 0.5, "the step failed: Command", id="too-slow"),
])
def test_a_child_that_does_not_finish_is_a_pack_error(argv: list[str], timeout: float, fragment: str) -> None:
    with pytest.raises(PackError) as failed:
        _run(argv, env=os.environ, timeout=timeout, what="the step")
    assert str(failed.value).startswith(fragment)


def test_a_child_that_succeeds_is_its_output() -> None:
    done = _run([sys.executable, "-c", "print('made')"], env=os.environ, timeout=60, what="the step")
    assert done.stdout == "made\n"


@pytest.mark.parametrize(("wheel", "stated", "fragment"), [
    pytest.param("superfluid_toolchain-0.1.0-py3-none-any.whl", "0.1.0", None, id="same"),
    pytest.param("superfluid_toolchain-0.2.0rc1-py3-none-any.whl", "0.2.0rc1", None, id="same-pre-release"),
    pytest.param("superfluid_toolchain-0.1.1-py3-none-any.whl", "0.1.0",
                 "superfluid_toolchain-0.1.1-py3-none-any.whl is version 0.1.1, and its superfluid compat says '0.1.0'",
                 id="another-version"),
])
def test_the_wheel_states_its_documents_version(wheel: str, stated: str, fragment: str | None) -> None:
    doc = {"release": {"version": stated}}
    if fragment is None:
        _check_version(doc, Path(wheel))
    else:
        with pytest.raises(PackError, match=fragment):
            _check_version(doc, Path(wheel))


def test_the_output_folder_is_new_or_empty(tmp_path: Path) -> None:
    _check_out(tmp_path / "new")
    _check_out(tmp_path)
    (tmp_path / "old.whl").write_bytes(b"stale")
    with pytest.raises(UsageError, match="not an empty directory; ci/pack writes into an empty one"):
        _check_out(tmp_path)
    with pytest.raises(UsageError, match="not an empty directory"):
        _check_out(tmp_path / "old.whl")


@pytest.mark.parametrize(("argv", "fragment"), [
    pytest.param([], "the following arguments are required: --out", id="no-out"),
    pytest.param(["--out", ""], "argument --out: needs DIR, not an empty string", id="empty-out"),
    pytest.param(["--out", "d", "--sign"], "unrecognized arguments: --sign", id="unknown-flag"),
])
def test_usage_errors_exit_2_before_anything_is_built(argv: list[str], fragment: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.startswith("ci/pack: ") and fragment in err and out == ""


def test_the_document_beside_is_this_checkouts(artifact: Path, doc: dict[str, Any]) -> None:
    _sidecars(artifact, doc, None, 0)
    written = json.loads((artifact.parent / f"{ARTIFACT}.compat.json").read_text())
    assert {k: v for k, v in written.items() if k != "release"} == {k: v for k, v in doc.items() if k != "release"}
