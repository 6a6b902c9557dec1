"""``installer/trust/refusals``: one typed refusal per attack the freshness check stops, each with the
exit code of the face's table and the stable ``--json`` code scripts read, carrying its fields and a
fix. (The attacks themselves are tests/installer/trust/test_tuf_client.py.)"""

from __future__ import annotations

import pytest

from superfluid.cli import exit_code
from superfluid.installer.trust import refusals
from superfluid.installer.trust.refusals import (
    AnswerMismatch,
    EndlessData,
    FreezeRefused,
    FreshnessError,
    MixAndMatch,
    NoFreshness,
    NotListed,
    NoTrustRoot,
    RollbackRefused,
    UntrustedSigner,
)
from superfluid.runtime.kernel.errors import SuperfluidError, UsageError
from superfluid.runtime.kernel.output import error_code

SERVICE = "https://manifest.example"

ERRORS = [
    pytest.param(RollbackRefused(SERVICE, "timestamp", 3, 7), FreshnessError, 1, "rollback-refused", id="rollback"),
    pytest.param(FreezeRefused(SERVICE, "timestamp", "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"),
                 FreshnessError, 1, "freeze-refused", id="freeze"),
    pytest.param(UntrustedSigner(SERVICE, "m", role="root"), FreshnessError, 1, "untrusted-signer", id="signer"),
    pytest.param(MixAndMatch(SERVICE, "m", role="snapshot"), FreshnessError, 1, "mix-and-match", id="mix-and-match"),
    pytest.param(EndlessData(SERVICE, "m", limit=16384, role="timestamp"), FreshnessError, 1, "endless-data",
                 id="endless-data"),
    pytest.param(AnswerMismatch(SERVICE, "m"), FreshnessError, 1, "answer-mismatch", id="answer-mismatch"),
    pytest.param(NoFreshness(SERVICE, "m"), FreshnessError, 1, "no-freshness", id="no-freshness"),
    pytest.param(FreshnessError(SERVICE, "m", role="targets"), FreshnessError, 1, "freshness", id="any-other"),
    pytest.param(NotListed(SERVICE, "/v1/choose/x/abi/2"), SuperfluidError, 1, "not-listed", id="not-listed"),
    pytest.param(NoTrustRoot("m"), UsageError, 2, "no-trust-root", id="no-trust-root"),
]


@pytest.mark.parametrize(("error", "base", "exit", "code"), ERRORS)
def test_each_refusal_has_its_kind_exit_and_code(error: SuperfluidError, base: type[Exception], exit: int,
                                                 code: str) -> None:
    assert isinstance(error, base)
    assert exit_code(error) == exit
    assert error_code(error) == code


def test_every_public_refusal_is_in_the_table() -> None:
    tested = {type(p.values[0]).__name__ for p in ERRORS}
    assert tested == set(refusals.__all__)


@pytest.mark.parametrize(("role", "fix_names"), [
    pytest.param("timestamp", "refresh-timestamp", id="timestamp"),
    pytest.param("snapshot", "export --tuf-keys", id="snapshot"),
    pytest.param("targets", "export --tuf-keys", id="targets"),
    pytest.param("root", "rotate-root", id="root"),
    pytest.param("mirrors", "refresh-timestamp", id="an-unknown-role-gets-the-timestamps"),
])
def test_a_freeze_names_the_command_that_re_signs_that_role(role: str, fix_names: str) -> None:
    e = FreezeRefused(SERVICE, role, "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z")
    assert (e.service, e.role, e.expires) == (SERVICE, role, "2026-01-01T00:00:00Z")
    assert e.advice is not None and fix_names in e.advice and e.fixes == ()
    assert "2026-01-01T00:00:00Z" in e.message and "2026-02-01T00:00:00Z" in e.message and role in e.message


@pytest.mark.parametrize(("named_by", "shown"), [
    pytest.param("", "(timestamp)", id="plain"),
    pytest.param(" named by snapshot", "(timestamp named by snapshot)", id="named-by"),
])
def test_a_rollback_carries_both_versions(named_by: str, shown: str) -> None:
    e = RollbackRefused(SERVICE, "timestamp", 3, 7, named_by=named_by)
    assert (e.service, e.role, e.got, e.seen) == (SERVICE, "timestamp", 3, 7)
    assert shown in e.message and "3" in e.message and "7" in e.message and SERVICE in e.message
    assert e.advice


def test_endless_data_carries_its_limit() -> None:
    e = EndlessData(SERVICE, "more than 16384 bytes", limit=16384, role="timestamp")
    assert (e.limit, e.role, e.service, e.advice, e.fixes) == (16384, "timestamp", SERVICE, None, ())


def test_not_listed_carries_the_path_and_the_way_round() -> None:
    e = NotListed(SERVICE, "/v1/choose/x/abi/2")
    assert (e.service, e.path) == (SERVICE, "/v1/choose/x/abi/2")
    assert e.advice is not None and "--insecure-no-freshness" in e.advice


def test_a_static_export_is_not_told_to_be_asked_unchecked() -> None:
    """A folder answers nothing it does not hold, checked or not (issue 42, item 22)."""
    e = NotListed("file:///srv/export/", "v1/choose/basert/abi/2")
    assert e.advice is not None and "--insecure-no-freshness" not in str(e) and "static export" in e.advice
