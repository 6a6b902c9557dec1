"""``manifest.minisign``: minisign's key and signature files, read and written byte for byte as the
real ``minisign`` does, and interoperable both ways (SPEC §8.3)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from superfluid.manifest import minisign as m
from tests.ci.conftest import KeyPair, make_key_pair, run_minisign


@dataclass(frozen=True)
class Real:
    """Files made by the real minisign: a key pair, a message, its ED and legacy Ed signatures."""

    keys: KeyPair
    message: Path
    hashed: Path  # minisign -S
    legacy: Path  # minisign -S -l


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Real:
    root = tmp_path_factory.mktemp("minisign")
    keys = make_key_pair(root / "keys")
    message = root / "doc.compat.json"
    message.write_bytes(b'{"schema": "superfluid-compat/1"}\n')
    hashed, legacy = root / "hashed.minisig", root / "legacy.minisig"
    for sig, extra in ((hashed, ()), (legacy, ("-l",))):
        done = run_minisign("-S", *extra, "-s", str(keys.secret), "-m", str(message), "-x", str(sig),
                            "-t", "release 1.0 \u2713\tsigned")
        assert done.returncode == 0, done.stderr
    return Real(keys, message, hashed, legacy)


def _public(real: Real) -> m.PublicKey:
    return m.parse_public_key(real.keys.public.read_text(), str(real.keys.public))


# -- reading minisign's files ------------------------------------------------------------------------


def test_public_key_reads_and_writes_back_byte_for_byte(real: Real) -> None:
    text = real.keys.public.read_text()
    key = m.parse_public_key(text, "k.pub")
    assert key.to_text() == text and key.id == real.keys.key_id
    assert m.parse_public_key(key.base64, "-P") == key  # the lone base64 string, as `minisign -P` takes it


@pytest.mark.parametrize("which", ["hashed", "legacy"])
def test_signature_reads_and_writes_back_byte_for_byte(real: Real, which: str) -> None:
    text = getattr(real, which).read_text()
    sig = m.parse_signature(text, "x.minisig")
    assert sig.to_text() == text
    assert sig.prehashed is (which == "hashed") and sig.key_id_text == real.keys.key_id
    assert sig.trusted_comment == "release 1.0 \u2713\tsigned"


def test_secret_key_of_minisign_g_w_reads(real: Real) -> None:
    key = m.parse_secret_key(real.keys.secret.read_text(), "k.key")
    assert key.public() == _public(real) and key.id == real.keys.key_id


def test_secret_key_repr_shows_the_id_only(real: Real) -> None:
    key = m.parse_secret_key(real.keys.secret.read_text(), "k.key")
    shown = repr(key) + str(key)
    assert shown.count(real.keys.key_id) == 2 and key.seed.hex() not in shown and "seed" not in shown


# -- interoperability -----------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["hashed", "legacy"])
def test_we_accept_what_minisign_signs(real: Real, which: str) -> None:
    sig = m.parse_signature(getattr(real, which).read_text(), "x.minisig")
    assert m.verify(real.message.read_bytes(), sig, [_public(real)], where="doc") == _public(real)


@pytest.mark.parametrize("prehash", [True, False], ids=["ED", "legacy-Ed"])
def test_minisign_accepts_what_we_sign(real: Real, tmp_path: Path, prehash: bool) -> None:
    key = m.parse_secret_key(real.keys.secret.read_text(), "k.key")
    sig = m.sign(real.message.read_bytes(), key, trusted_comment="timestamp:1\tfile:doc.compat.json \u00e9",
                 untrusted_comment="made by ci/pack", prehash=prehash)
    (tmp_path / "ours.minisig").write_text(sig.to_text())
    done = run_minisign("-Vm", str(real.message), "-p", str(real.keys.public), "-x", str(tmp_path / "ours.minisig"))
    assert done.returncode == 0, done.stderr
    assert "Trusted comment: timestamp:1\tfile:doc.compat.json \u00e9" in done.stdout


def test_a_generated_key_is_minisigns(real: Real, tmp_path: Path) -> None:
    key = m.generate()
    (tmp_path / "g.key").write_text(key.to_text())
    assert m.parse_secret_key(key.to_text(), "g.key").public() == key.public()
    done = run_minisign("-R", "-s", str(tmp_path / "g.key"), "-p", str(tmp_path / "g.pub"))  # recreate the pub
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "g.pub").read_text() == key.public().to_text()
    signed = run_minisign("-S", "-s", str(tmp_path / "g.key"), "-m", str(real.message), "-x", str(tmp_path / "g.sig"))
    assert signed.returncode == 0, signed.stderr
    sig = m.parse_signature((tmp_path / "g.sig").read_text(), "g.sig")
    assert m.verify(real.message.read_bytes(), sig, [key.public()], where="doc") == key.public()


# -- refusals: verification ----------------------------------------------------------------------------


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]


@pytest.mark.parametrize(("tamper", "error", "fragment"), [
    pytest.param(lambda msg, sig: (_flip(msg, 3), sig), m.SignatureInvalid,
                 "doc: its signature does not verify with trusted key", id="message-changed"),
    pytest.param(lambda msg, sig: (msg, replace(sig, trusted_comment=sig.trusted_comment + "!")), m.SignatureInvalid,
                 "doc: the signature of its trusted comment does not verify", id="trusted-comment-changed"),
    pytest.param(lambda msg, sig: (msg, replace(sig, signature=_flip(sig.signature, 0))), m.SignatureInvalid,
                 "its signature does not verify", id="signature-changed"),
    pytest.param(lambda msg, sig: (msg, replace(sig, global_signature=_flip(sig.global_signature, 9))),
                 m.SignatureInvalid, "the signature of its trusted comment", id="global-signature-changed"),
    pytest.param(lambda msg, sig: (msg, replace(sig, algorithm=b"Ed")), m.SignatureInvalid,
                 "its signature does not verify", id="ED-read-as-legacy"),
    pytest.param(lambda msg, sig: (msg, replace(sig, key_id=bytes(8))), m.UntrustedKey,
                 "doc: signed by key 0000000000000000, which is not a trusted key (trusted: ", id="unknown-key-id"),
])
def test_verify_refuses(real: Real, tamper, error: type[Exception], fragment: str) -> None:
    sig = m.parse_signature(real.hashed.read_text(), "x.minisig")
    message, sig = tamper(real.message.read_bytes(), sig)
    with pytest.raises(error) as caught:
        m.verify(message, sig, [_public(real)], where="doc")
    assert fragment in str(caught.value)


def test_another_key_with_the_same_id_does_not_verify(real: Real) -> None:
    impostor = replace(m.generate().public(), key_id=_public(real).key_id)
    sig = m.parse_signature(real.hashed.read_text(), "x.minisig")
    with pytest.raises(m.SignatureInvalid):
        m.verify(real.message.read_bytes(), sig, [impostor], where="doc")
    assert m.verify(real.message.read_bytes(), sig, [impostor, _public(real)], where="doc") == _public(real)


# -- refusals: files that are not minisign's --------------------------------------------------------------


def _sig_lines(real: Real) -> list[str]:
    return real.hashed.read_text().split("\n")


@pytest.mark.parametrize(("edit", "fragment"), [
    pytest.param(lambda ls: ls[:2], "four lines expected", id="truncated"),
    pytest.param(lambda ls: ["comment: x", *ls[1:]], "its first line must start with 'untrusted comment:'",
                 id="no-untrusted-prefix"),
    pytest.param(lambda ls: [ls[0], "!!" + ls[1][2:], *ls[2:]], "line 2 must be base64 of 74 bytes", id="bad-base64"),
    pytest.param(lambda ls: [ls[0], ls[1][:-8], *ls[2:]], "line 2 must be base64 of 74 bytes", id="short"),
    pytest.param(lambda ls: [ls[0], base64.b64encode(b"Ex" + bytes(72)).decode(), *ls[2:]],
                 "a signature of algorithm b'Ex'", id="unknown-algorithm"),
    pytest.param(lambda ls: [ls[0], ls[1], "comment: x", *ls[3:]], "line 3 must start with 'trusted comment:'",
                 id="no-trusted-prefix"),
    pytest.param(lambda ls: [ls[0], ls[1], ls[2] + "\x1b[31m", *ls[3:]], "trusted comment with control characters",
                 id="escape-in-trusted-comment"),
    pytest.param(lambda ls: [ls[0], ls[1], ls[2] + "\rx", *ls[3:]], "four lines expected", id="carriage-return"),
    pytest.param(lambda ls: [*ls[:3], "AAAA"], "line 4 must be base64 of 64 bytes", id="short-global"),
])
def test_malformed_signature_files(real: Real, edit, fragment: str) -> None:
    with pytest.raises(m.BadSignatureFile) as caught:
        m.parse_signature("\n".join(edit(_sig_lines(real))), "x.minisig")
    assert str(caught.value).startswith("x.minisig: ") and fragment in str(caught.value)


def test_crlf_signature_files_read(real: Real) -> None:
    text = real.hashed.read_text()
    assert m.parse_signature(text.replace("\n", "\r\n"), "x") == m.parse_signature(text, "x")


@pytest.mark.parametrize(("text", "fragment"), [
    pytest.param("", "is not a minisign public key", id="empty"),
    pytest.param("untrusted comment: k\nRWQ=\n", "is not a minisign public key", id="short"),
    pytest.param(f"untrusted comment: k\n{base64.b64encode(b'Xy' + bytes(40)).decode()}\n",
                 "is a public key for algorithm b'Xy'", id="another-algorithm"),
    pytest.param(b"\xff\xfe", "is not UTF-8 text", id="binary"),
])
def test_malformed_public_keys(text: str | bytes, fragment: str) -> None:
    with pytest.raises(m.BadKey) as caught:
        m.parse_public_key(text, "k.pub")
    assert str(caught.value).startswith("k.pub: ") and fragment in str(caught.value)


def _secret_raw(real: Real) -> bytes:
    return base64.b64decode(real.keys.secret_line)


def _secret_text(raw: bytes) -> str:
    return f"untrusted comment: k\n{base64.b64encode(raw).decode()}\n"


@pytest.mark.parametrize(("mutate", "fragment"), [
    pytest.param(lambda raw: raw[:-1], "is not a minisign secret key", id="short"),
    pytest.param(lambda raw: b"Xy" + raw[2:], "another algorithm than Ed25519", id="another-algorithm"),
    pytest.param(lambda raw: raw[:4] + b"Zz" + raw[6:], "checksum of another kind", id="another-checksum"),
    pytest.param(lambda raw: raw[:2] + b"Qq" + raw[4:], "a key derivation minisign does not define", id="unknown-kdf"),
    pytest.param(lambda raw: raw[:126] + b"\x01" * 32, "does not match its own checksum", id="wrong-checksum"),
])
def test_malformed_secret_keys_never_quote_the_key(real: Real, mutate, fragment: str) -> None:
    with pytest.raises(m.BadKey) as caught:
        m.parse_secret_key(_secret_text(mutate(_secret_raw(real))), "the secret key in X")
    message = str(caught.value)
    assert fragment in message and real.keys.secret_line[10:40] not in message


def test_an_encrypted_secret_key_is_refused_with_the_fix(tmp_path: Path) -> None:
    done = run_minisign("-G", "-p", str(tmp_path / "e.pub"), "-s", str(tmp_path / "e.key"), stdin="pw\npw\n")
    assert done.returncode == 0, done.stderr
    with pytest.raises(m.EncryptedKey, match="is encrypted with a password.*minisign -C -W"):
        m.parse_secret_key((tmp_path / "e.key").read_text(), "e.key")


def test_a_checksummed_unencrypted_key_reads(real: Real) -> None:
    """minisign -G -W leaves the checksum zero; a key whose password was removed (-C -W) keeps a real one."""
    raw = _secret_raw(real)
    assert raw[126:] == bytes(32)
    key = m.parse_secret_key(_secret_text(raw), "k")
    assert m.parse_secret_key(key.to_text(), "k").public() == key.public()
    assert base64.b64decode(key.to_text().splitlines()[1])[126:] != bytes(32)


@pytest.mark.parametrize("comment", ["two\nlines", "esc\x1b", "x" * 9000])
def test_sign_refuses_a_comment_minisign_would_not_write(real: Real, comment: str) -> None:
    key = m.parse_secret_key(real.keys.secret.read_text(), "k.key")
    with pytest.raises(ValueError, match="trusted comment must"):
        m.sign(b"x", key, trusted_comment=comment)
