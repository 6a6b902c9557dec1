"""``installer/transport/requests_fetcher.py``: every method through ``requests`` (a mocked transport,
``responses``), the body as sent, no credential of requests' own, its faults mapped."""

from __future__ import annotations

from pathlib import Path

import pytest
import responses

from superfluid.installer.config import FetchConfig
from superfluid.installer.errors import DownloadError
from superfluid.installer.transport.messages import Upload
from superfluid.installer.transport.requests_fetcher import RequestsFetcher

API = "https://api.example.test"


@responses.activate
@pytest.mark.parametrize("method", ["HEAD", "POST", "PUT", "PATCH"])
def test_every_method_is_sent_as_it_is(rf: RequestsFetcher, method: str) -> None:
    responses.add(method, f"{API}/x", status=201, headers={"Location": "/next"})
    with rf.request(method, f"{API}/x", {"Content-Length": "0"}, accept=()) as r:
        assert (r.status, r.headers["location"], r.read()) == (201, "/next", b"")
    assert responses.calls[0].request.method == method


@responses.activate
def test_an_upload_is_the_body_sent(rf: RequestsFetcher, tmp_path: Path) -> None:
    path = tmp_path / "blob"
    path.write_bytes(b"x" * 5000)
    responses.put(f"{API}/blob", status=201)
    upload = Upload(path, 5000, name="blob")
    try:
        rf.request("PUT", f"{API}/blob", {"Content-Length": "5000"}, body=upload).close()
    finally:
        upload.close()
    sent = responses.calls[0].request
    assert (sent.headers["Content-Length"], sent.body) == ("5000", b"x" * 5000)
    assert len(upload) == 0  # read whole


@responses.activate
def test_netrc_credentials_are_not_added(rf: RequestsFetcher, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine elsewhere.test login u password p\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    responses.get("https://elsewhere.test/x", body=b"x")
    rf.get_bytes("https://elsewhere.test/x", max_bytes=10)
    assert "Authorization" not in responses.calls[0].request.headers


@responses.activate
def test_connection_error_is_retryable(rf: RequestsFetcher, sleeps: list[float]) -> None:
    import requests

    responses.get(f"{API}/a", body=requests.exceptions.ConnectionError("refused"))
    responses.get(f"{API}/a", body=b"ok")
    _, body = rf.get_bytes(f"{API}/a", max_bytes=100)
    assert body == b"ok" and sleeps == [0.5]


def test_the_no_sockets_fixture_catches_a_real_connection(no_sockets: list[object]) -> None:
    with pytest.raises(DownloadError):
        RequestsFetcher(FetchConfig(retries=0)).open("http://127.0.0.1:9/x")
    assert no_sockets == [("127.0.0.1", 9)]
