"""``runtime/ordering``: the one sort key of versions (PEP 440, else runs of digits) and of backends
(by family, SPEC §3), and a version's ``MAJOR.MINOR`` line."""

from __future__ import annotations

import pytest

from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.ordering import backend_family, backend_rank, check_backend, version_key, version_line

ORDERED = ["0.2.6", "0.3.0", "0.3.1", "0.4.0rc1", "0.4.0", "0.10.0", "1.0.0"]


def test_version_order() -> None:
    assert sorted(reversed(ORDERED), key=version_key) == ORDERED
    assert sorted(["b11642", "b11284", "b9999", "b100"], key=version_key) == ["b100", "b9999", "b11284", "b11642"]


@pytest.mark.parametrize("backend,rank", [("metal", 0), ("cuda-13.4", 1), ("cuda_12", 1), ("CUDA-12", 1), ("rocm", 2),
                                          ("vulkan", 3), ("sycl-fp16", 4), ("openvino", 5), ("musa", 8),
                                          ("weird", 8), ("cpu", 9)])
def test_backend_rank(backend: str, rank: int) -> None:
    assert backend_rank(backend) == rank
#: equal keys: the same release however it is written (trailing zeros, a leading v)
SAME = [("0.4", "0.4.0"), ("0.4.0", "v0.4.0"), ("1", "1.0.0"), ("b11642", "build 11642")]


@pytest.mark.parametrize(("a", "b"), SAME, ids=[f"{a}={b}" for a, b in SAME])
def test_the_same_version_written_twice(a: str, b: str) -> None:
    assert version_key(a) == version_key(b)


@pytest.mark.parametrize(("older", "newer"), [
    ("0.4.0.dev1", "0.4.0rc1"), ("0.4.0a1", "0.4.0b1"), ("0.9.9", "0.10"), ("1.0.0a1", "1.0.0"),
    ("no-digits", "0.0.1"), ("no-digits", "b1"), ("0.4.0", "b100"),
], ids=["dev-before-rc", "alpha-before-beta", "numeric-not-text", "pre-before-final", "no-digits-first",
        "no-digits-before-a-build", "a-build-by-its-number"])
def test_older_sorts_first(older: str, newer: str) -> None:
    assert version_key(older) < version_key(newer)


@pytest.mark.parametrize("order", [
    ("0.4.0.dev1", "0.4.0rc1", "0.4.0rc1.post1", "0.4.0", "0.4.0.post1.dev1", "0.4.0.post1", "0.4.0.post2", "0.4.1"),
    ("1.0.0rc1", "1.0", "1.0.0.post1", "1.0.1.dev0"),
])
def test_a_post_release_is_newer(order: tuple[str, ...]) -> None:
    """As PEP 440 orders them: pre- and dev releases before their release, post-releases after."""
    from packaging.version import Version

    assert sorted(order, key=version_key) == list(order) == sorted(order, key=Version)


@pytest.mark.parametrize(("backend", "family"), [("cuda-13.4", "cuda"), ("cuda_12", "cuda"), ("CUDA-12", "CUDA"),
                                                 ("cpu", "cpu"), ("sycl-fp16_x", "sycl"), ("", "")])
def test_backend_family(backend: str, family: str) -> None:
    assert backend_family(backend) == family


@pytest.mark.parametrize(("version", "line"), [("0.3.1", "0.3"), ("1.20.3-rc1", "1.20"), ("0.3", "0.3"),
                                               ("3", None), ("a.b.c", None), (None, None), ("00.03.1", "0.3")])
def test_version_line(version: str | None, line: str | None) -> None:
    assert version_line(version) == line


@pytest.mark.parametrize("backend", ["cpu", "cuda", "cuda-13.4", "CUDA-12", "sycl-fp16", "openvino-2026.4",
                                     "rocm-10.0"])
def test_a_kind_of_machine_or_a_build_of_one_is_a_backend(backend: str) -> None:
    assert check_backend(backend) == backend


@pytest.mark.parametrize("backend", ["nope", "", "cuda;rm", "-cuda", "gpu", "kompute-1"])
def test_another_word_is_a_usage_error_naming_the_kinds(backend: str) -> None:
    with pytest.raises(UsageError, match=r"--backend .* is not a kind of machine \(metal, cuda, rocm"):
        check_backend(backend)
