"""``runtime/redact``: a URL's userinfo (``user:password@``) is dropped wherever a URL is kept or
shown; ``split_userinfo`` hands the credential to the fetcher, unquoted."""

from __future__ import annotations

import pytest

from superfluid.runtime.kernel.redact import redact_text, redact_url, split_userinfo


@pytest.mark.parametrize(("url", "clean"), [
    ("https://u:p@h.example/x", "https://h.example/x"),
    ("http://user@127.0.0.1:8080/a/b?c=d", "http://127.0.0.1:8080/a/b?c=d"),
    ("https://u%40x:p%3Aw@h.example:8443/r/", "https://h.example:8443/r/"),
    ("https://h.example/a@b", "https://h.example/a@b"),
    ("file:///srv/mirror", "file:///srv/mirror"),
    ("/a/path/with@at", "/a/path/with@at"),
    ("https://:p@h.example/x", "https://h.example/x"),
    ("http://u:p@[::1]:8080/a", "http://[::1]:8080/a"),
    ("https://u:p@h.example", "https://h.example"),
], ids=["user-password", "user-only", "quoted", "at-in-path", "file-url", "local-path", "password-only", "ipv6",
        "no-path"])
def test_redact_url(url: str, clean: str) -> None:
    assert redact_url(url) == clean
    assert split_userinfo(url)[0] == clean
    assert redact_text(f"GET {url} failed") == f"GET {clean} failed"


@pytest.mark.parametrize(("url", "user", "password"), [
    ("https://u:p@h.example/x", "u", "p"),
    ("https://u%40x:p%3Aw@h.example:8443/r/", "u@x", "p:w"),
    ("http://user@127.0.0.1:8080/a", "user", None),
    ("https://:p@h.example/x", "", "p"),
    ("https://h.example/x", None, None),
    ("/a/local/path", None, None),
], ids=["both", "unquoted", "user-only", "empty-user", "none", "local-path"])
def test_split_userinfo_unquotes_the_credential(url: str, user: str | None, password: str | None) -> None:
    assert split_userinfo(url)[1:] == (user, password)


def test_a_url_without_userinfo_comes_back_as_given() -> None:
    # not normalized: the scheme's and host's case and an empty port stay as they were written
    for url in ("HTTPS://H.example/X", "https://h.example:/x", "https://h.example/x?q=a@b#f"):
        assert redact_url(url) == url and split_userinfo(url) == (url, None, None)


def test_redact_text_drops_every_urls_userinfo_and_only_that() -> None:
    text = "GET https://a:1@one.example/x failed; then http://b@two.example/y; mail me@home, s3://k:v@bucket/z"
    assert redact_text(text) == ("GET https://one.example/x failed; then http://two.example/y; mail me@home, "
                                 "s3://bucket/z")
    assert redact_text("no url at all") == "no url at all"


def test_an_unquoted_at_in_the_password_is_not_shown() -> None:
    url = "https://user:p@ss@mirror.example/x"
    assert split_userinfo(url) == ("https://mirror.example/x", "user", "p@ss")  # what is sent
    assert redact_url(url) == "https://mirror.example/x"  # what is shown (it was "https://ss@mirror.example/x")
