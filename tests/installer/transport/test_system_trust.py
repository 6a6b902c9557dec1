"""TLS as the operating system verifies it (issue 31, item 6): a real HTTPS server on loopback whose
certificate is signed by a company's root that is in the system's store (OpenSSL's default
locations, here named by ``SSL_CERT_FILE`` as a distribution's store is) and not in certifi's bundle.
``RequestsFetcher`` trusts it through truststore; plain requests, with certifi alone, refuses it."""

from __future__ import annotations

import datetime
import http.server
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.threaded_server import serving

pytest.importorskip("truststore")


def _certificates(tmp: Path) -> tuple[Path, Path, Path]:
    """A root CA, and a server certificate for 127.0.0.1 it signs: (ca.pem, server.pem, server.key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Example Corp Root CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    import ipaddress

    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = tmp / "ca.pem", tmp / "server.pem", tmp / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        body = b"hello from behind the company's root"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def https(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    ca, cert, key = _certificates(tmp_path)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    with serving(server) as port:
        yield f"https://127.0.0.1:{port}/hello", ca


FETCH = """
import sys
from superfluid.installer.transport.requests_fetcher import RequestsFetcher
from superfluid.installer.errors import DownloadError
f = RequestsFetcher()
try:
    print(f.get_bytes(sys.argv[1], max_bytes=1000)[1].decode())
except DownloadError as e:
    print("refused:", e)
"""
PLAIN = """
import sys, requests
try:
    print(requests.get(sys.argv[1], timeout=10).text)
except requests.exceptions.SSLError as e:
    print("refused:", type(e).__name__)
"""


def _run(script: str, url: str, store: Path) -> str:
    """``script`` in a fresh interpreter whose system store is ``store`` (OpenSSL reads SSL_CERT_FILE
    for its default locations) and with no bundle of requests' named."""
    env = {"PATH": "/usr/bin:/bin", "SSL_CERT_FILE": str(store), "HOME": str(store.parent)}
    done = subprocess.run([sys.executable, "-c", script, url], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_root_in_the_system_store_is_trusted(https: tuple[str, Path]) -> None:
    url, ca = https
    assert _run(FETCH, url, ca) == "hello from behind the company's root"
    assert _run(PLAIN, url, ca) == "refused: SSLError"  # what certifi alone said: the complaint


def test_a_root_in_no_store_is_refused(https: tuple[str, Path], tmp_path: Path) -> None:
    url, _ca = https
    empty = tmp_path / "empty.pem"
    empty.write_text("")
    assert _run(FETCH, url, empty).startswith("refused:")
