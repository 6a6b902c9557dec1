"""The install name ``<version>-<backend>``: made by ``install_name``, read back by ``parse_install_name``."""

from __future__ import annotations

import pytest

from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.planning import install_name, parse_install_name

NAMES = [
    pytest.param("0.4.0-cpu", ("0.4.0", "cpu"), id="basert"),
    pytest.param("b11642-cpu", ("b11642", "cpu"), id="llamacpp"),
    pytest.param("b11642-cuda-13.4", ("b11642", "cuda-13.4"), id="a-backend-with-a-dash"),
    pytest.param("b11284-sycl-fp16", ("b11284", "sycl-fp16"), id="another"),
    pytest.param("0.22.0-metal", ("0.22.0", "metal"), id="mlx"),
    pytest.param("custom-cpu", ("custom", "cpu"), id="from-a-build-of-ones-own"),
    pytest.param("0.4.0rc1-cuda_12", ("0.4.0rc1", "cuda_12"), id="pre-release"),
    pytest.param("nodash", None, id="no-backend"),
    pytest.param("0.4.0-", None, id="empty-backend"),
    pytest.param("-cpu", None, id="empty-version"),
    pytest.param("", None, id="empty"),
]


@pytest.mark.parametrize(("name", "parts"), NAMES)
def test_parse_install_name(name: str, parts: tuple[str, str] | None) -> None:
    assert parse_install_name(name) == parts


@pytest.mark.parametrize(("name", "parts"), [p for p in NAMES if p.values[1] is not None])
def test_a_name_made_reads_back(name: str, parts: tuple[str, str]) -> None:
    assert install_name(*parts) == name
    assert parse_install_name(install_name(*parts)) == parts


@pytest.mark.parametrize(("version", "backend"), [
    pytest.param(".hidden", "cpu", id="dot-first"),
    pytest.param("a/b", "cpu", id="slash"),
    pytest.param("1.0", "cu da", id="space"),
])
def test_install_name_refuses_a_name_no_directory_can_have(version: str, backend: str) -> None:
    with pytest.raises(UsageError, match="is not a name an install can have"):
        install_name(version, backend)


def test_first_published_skips_a_plan_with_an_archive_the_release_does_not_publish() -> None:
    from superfluid.runtime.planning import Plan, PlanAsset, first_published

    def plan(version: str, *sources: str) -> Plan:
        assets = tuple(PlanAsset(name=f"{version}-{i}.tar.gz", url=f"https://h/{version}-{i}.tar.gz", sha256=None,
                                 size=None, digest_source=s) for i, s in enumerate(sources))
        return Plan(id="llamacpp", version=version, backend="cpu", assets=assets, tested=True, chosen_by="tested",
                    abi=None, why="tested")

    half, whole, later = plan("b300", "release", "absent"), plan("b200", "release", "pin"), plan("b100", "api")
    assert first_published([half, whole, later]) is whole
    assert first_published([whole, half]) is whole
    assert first_published([half]) is None and first_published([]) is None
