"""``installer/transport/urls.py``: what the seam reads from a URL (its origin, ``host:port``, whether
it names this machine, a ``file://`` URL's path) and the wait a ``Retry-After`` asks for."""

from __future__ import annotations

import email.utils

import pytest

from superfluid.installer.errors import DownloadError
from superfluid.installer.transport.urls import address_of, is_loopback, origin_of, parse_retry_after, path_of_file_url


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://API.github.com/repos/x", "https://api.github.com"),
        ("https://api.github.com:443/x", "https://api.github.com"),
        ("http://127.0.0.1:8080/x", "http://127.0.0.1:8080"),
        ("http://h:80/", "http://h"),
        ("http://[::1]:9/x", "http://[::1]:9"),
    ],
    ids=["case", "default-https-port", "port", "default-http-port", "ipv6"],
)
def test_origin_of(url: str, origin: str) -> None:
    assert origin_of(url) == origin


@pytest.mark.parametrize(
    ("url", "loop"),
    [("http://127.0.0.1:1/", True), ("http://127.9.9.9/", True), ("http://localhost/", True),
     ("http://[::1]/", True), ("http://10.0.0.1/", False), ("http://example.test/", False)],
)
def test_is_loopback(url: str, loop: bool) -> None:
    assert is_loopback(url) is loop


def test_retry_after_forms() -> None:
    now = 1_000_000.0
    assert parse_retry_after("7", now=now) == 7.0
    assert parse_retry_after(email.utils.formatdate(now + 30, usegmt=True), now=now) == pytest.approx(30, abs=1)
    assert parse_retry_after("soon", now=now) is None
    assert parse_retry_after(None, now=now) is None


@pytest.mark.parametrize(
    ("url", "address"),
    [("https://mirror.example.test/x", "mirror.example.test:443"), ("http://h.test/x", "h.test:80"),
     ("http://127.0.0.1:8080/x", "127.0.0.1:8080"), ("http://h.test:99999/x", "h.test:80")],
    ids=["https-default", "http-default", "port", "bad-port"],
)
def test_address_of(url: str, address: str) -> None:
    assert address_of(url) == address


def test_a_subdomain_of_localhost_is_loopback() -> None:
    assert is_loopback("http://mirror.localhost:8080/") and not is_loopback("http://localhost.example.test/")


@pytest.mark.parametrize(
    ("url", "path"),
    [("file:///srv/mirror/a.json", "/srv/mirror/a.json"), ("file://localhost/srv/m", "/srv/m"),
     ("file:///srv/a%20b", "/srv/a b")],
    ids=["plain", "localhost", "percent-decoded"],
)
def test_path_of_file_url(url: str, path: str) -> None:
    assert path_of_file_url(url) == path


def test_a_file_url_naming_another_host_is_refused() -> None:
    with pytest.raises(DownloadError, match="must name a local path"):
        path_of_file_url("file://fileserver/srv/mirror")
