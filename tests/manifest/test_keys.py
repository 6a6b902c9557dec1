"""``manifest/keys``: the trusted public keys (the package's, the home's, the named; a broken one an
error, never skipped), the signing key from CI's variables, and a new key pair's two files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from superfluid.manifest.keys import (
    read_key_dir,
    read_public_key,
    signing_key,
    trusted_keys,
    write_key_pair,
)
from superfluid.manifest.minisign import BadKey, SecretKey, generate
from superfluid.manifest.settings import ENV_KEY, ENV_KEY_FILE
from superfluid.runtime.kernel.errors import BadFile, UsageError


def test_a_public_key_reads_with_its_source(tmp_path: Path, key: SecretKey) -> None:
    path = tmp_path / "release.pub"
    path.write_text(key.public().to_text())
    trusted = read_public_key(path)
    assert trusted.source == str(path) and trusted.key.to_text() == key.public().to_text()


@pytest.mark.parametrize(("content", "error"), [
    pytest.param(b"not a key\n", BadKey, id="not-a-key"),
    pytest.param(b"untrusted comment: x\n" + b"A" * 5000, BadKey, id="too-long"),
    pytest.param(None, BadFile, id="absent"),
])
def test_a_public_key_that_does_not_read(tmp_path: Path, content: bytes | None, error: type[Exception]) -> None:
    path = tmp_path / "k.pub"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(error) as caught:
        read_public_key(path)
    assert str(path) in str(caught.value)


def test_a_key_folder_is_its_pub_files_by_name(tmp_path: Path, key: SecretKey) -> None:
    assert read_key_dir(tmp_path / "absent") == []
    other = generate()
    (tmp_path / "b.pub").write_text(key.public().to_text())
    (tmp_path / "a.pub").write_text(other.public().to_text())
    (tmp_path / "notes.txt").write_text("not a key, not read")
    assert [k.source for k in read_key_dir(tmp_path)] == [str(tmp_path / "a.pub"), str(tmp_path / "b.pub")]
    (tmp_path / "c.pub").write_text("broken")
    with pytest.raises(BadKey, match="c.pub"):  # a broken trust store never quietly shrinks
        read_key_dir(tmp_path)
    with pytest.raises(BadFile, match="cannot be listed"):
        read_key_dir(tmp_path / "notes.txt")


def test_trusted_keys_are_the_packages_the_homes_then_the_named(tmp_path: Path, key: SecretKey) -> None:
    home = tmp_path / "home"
    (home / "keys").mkdir(parents=True)
    mine, named = generate(), tmp_path / "named.pub"
    (home / "keys" / "mine.pub").write_text(mine.public().to_text())
    named.write_text(key.public().to_text())
    shipped = trusted_keys(str(tmp_path / "empty-home"))
    got = trusted_keys(str(home), [str(named)])
    assert [k.source for k in got] == [k.source for k in shipped] + [str(home / "keys" / "mine.pub"), str(named)]


def test_signing_key_from_a_file_or_the_variable(tmp_path: Path, key: SecretKey) -> None:
    path = tmp_path / "minisign.key"
    path.write_text(key.to_text())
    from_file = signing_key(path=str(path))
    assert from_file is not None and from_file[1] == str(path) and from_file[0].id == key.id
    from_env = signing_key(content=key.to_text())
    assert from_env is not None and from_env[1] == ENV_KEY and from_env[0].id == key.id
    assert signing_key() is None and signing_key(content="  \n", path="") is None


def test_signing_key_refusals_never_show_the_secret(tmp_path: Path, key: SecretKey) -> None:
    with pytest.raises(UsageError, match=f"both {ENV_KEY_FILE} and {ENV_KEY} are set"):
        signing_key(path="/k", content=key.to_text())
    with pytest.raises(BadFile, match="cannot be read"):
        signing_key(path=str(tmp_path / "absent.key"))
    secret_text = key.to_text().replace(key.to_text().splitlines()[1][:20], "AAAAAAAAAAAAAAAAAAAA")
    with pytest.raises(BadKey) as caught:
        signing_key(content=secret_text)
    assert f"the secret key in {ENV_KEY}" in str(caught.value)
    assert all(line not in str(caught.value) for line in secret_text.splitlines()[1:] if line)


def test_write_key_pair_makes_minisigns_two_files(tmp_path: Path, key: SecretKey) -> None:
    secret, public = write_key_pair(tmp_path / "new" / "dir", key)
    assert (secret.name, public.name) == ("minisign.key", "minisign.pub")
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
    assert secret.read_text() == key.to_text() and public.read_text() == key.public().to_text()
    with pytest.raises(UsageError, match="already exists; a new key pair never replaces one"):
        write_key_pair(tmp_path / "new" / "dir", generate())
    assert secret.read_text() == key.to_text()


def test_write_key_pair_into_what_cannot_be_a_folder(tmp_path: Path, key: SecretKey) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(BadFile, match="cannot be written"):
        write_key_pair(tmp_path / "file" / "dir", key)
