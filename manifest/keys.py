"""Where keys come from: the trusted public keys, release CI's signing key, a new key pair.

See docs/release.md, "Keys".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from superfluid.manifest.minisign import PublicKey, SecretKey, generate, parse_public_key, parse_secret_key
from superfluid.manifest.settings import ENV_KEY, ENV_KEY_FILE
from superfluid.runtime.kernel.errors import BadFile, UsageError
from superfluid.runtime.kernel.layout import keys_dir

__all__ = [
    "KEY_SUFFIX",
    "SECRET_KEY_NAME",
    "PUBLIC_KEY_NAME",
    "TrustedKey",
    "package_keys_dir",
    "read_public_key",
    "read_key_dir",
    "trusted_keys",
    "signing_key",
    "write_key_pair",
]

KEY_SUFFIX = ".pub"
#: the file names ``minisign -G`` uses by default, and ``ci/keygen`` too
SECRET_KEY_NAME = "minisign.key"
PUBLIC_KEY_NAME = "minisign.pub"
_MAX_KEY_BYTES = 4096  # a key file is two short lines


@dataclass(frozen=True, slots=True)
class TrustedKey:
    """A public key and the file it was read from."""

    key: PublicKey
    source: str


def package_keys_dir() -> Path:
    """``superfluid/keys``: the public keys this package ships (none until a maintainer adds one)."""
    return Path(str(files("superfluid"))).resolve() / "keys"  # package data of the face's folder, not its code


def _read(path: str | os.PathLike[str]) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(_MAX_KEY_BYTES + 1)
    except OSError as e:
        raise BadFile(os.fspath(path), f"cannot be read ({e.strerror or e})") from None


def read_public_key(path: str | os.PathLike[str]) -> TrustedKey:
    """The public key in the file at ``path``.

    Raises:
        BadFile: it cannot be read.
        BadKey: it is not a minisign public key.
    """
    where = os.fspath(path)
    return TrustedKey(parse_public_key(_read(path)[:_MAX_KEY_BYTES], where), where)


def read_key_dir(directory: str | os.PathLike[str]) -> list[TrustedKey]:
    """Every ``*.pub`` in ``directory``, by name; none when the directory does not exist.

    Raises:
        BadFile: a key file cannot be read.
        BadKey: a ``.pub`` there is not a minisign public key.
    """
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(KEY_SUFFIX))
    except FileNotFoundError:
        return []
    except OSError as e:
        raise BadFile(os.fspath(directory), f"cannot be listed ({e.strerror or e})") from None
    return [read_public_key(os.path.join(directory, n)) for n in names]


def trusted_keys(home: str, named: Sequence[str] = ()) -> list[TrustedKey]:
    """The keys a compat document may be signed with: the package's, ``<home>/keys``'s, ``named``.

    Raises:
        BadFile: a key file cannot be read.
        BadKey: a key file is not a minisign public key.
    """
    keys = read_key_dir(package_keys_dir()) + read_key_dir(keys_dir(home))
    return keys + [read_public_key(path) for path in named]


def signing_key(*, path: str = "", content: str = "") -> tuple[SecretKey, str] | None:
    """The secret key to sign with and where it came from, or None when none is given: ``path``
    (``SUPERFLUID_SIGNING_KEY_FILE``) names its file, ``content`` (``SUPERFLUID_SIGNING_KEY``) is it.

    Raises:
        UsageError: both variables are set.
        BadFile: the named file cannot be read.
        BadKey: not an unencrypted minisign secret key (``EncryptedKey`` for a password's).
    """
    if path and content:
        raise UsageError(f"both {ENV_KEY_FILE} and {ENV_KEY} are set; give the secret key one way")
    if path:
        return parse_secret_key(_read(path)[:_MAX_KEY_BYTES], path), path
    if content.strip():
        where = f"the secret key in {ENV_KEY}"
        return parse_secret_key(content, where), ENV_KEY
    return None


def write_key_pair(directory: str | os.PathLike[str], key: SecretKey) -> tuple[Path, Path]:
    """Write ``minisign.key`` (owner-only) and ``minisign.pub`` into ``directory``, as
    ``minisign -G -W -s DIR/minisign.key -p DIR/minisign.pub`` does; answers (secret, public).

    Neither file may exist already (as minisign, which needs ``-f`` to overwrite a pair).

    Raises:
        UsageError: either file exists.
        BadFile: the directory cannot be made or written.
    """
    root = Path(directory)
    secret, public = root / SECRET_KEY_NAME, root / PUBLIC_KEY_NAME
    for existing in (secret, public):
        if existing.exists():
            raise UsageError(f"{existing} already exists; a new key pair never replaces one (remove it first)")
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(key.to_text())
        public.write_text(key.public().to_text(), encoding="ascii")
    except OSError as e:
        raise BadFile(os.fspath(e.filename or root), f"cannot be written ({e.strerror or e})") from None
    return secret, public


def main(argv: Sequence[str] | None = None) -> int:
    """``ci/keygen DIR [--project ROOT]``: a new key pair in ``DIR`` (0 written, 2 refused)."""
    p = argparse.ArgumentParser(prog="ci/keygen", description="Write a new minisign key pair (unencrypted secret "
                                f"key {SECRET_KEY_NAME}, public key {PUBLIC_KEY_NAME}) into DIR.")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--project", metavar="ROOT", help="refuse a DIR inside this checkout (a secret key never "
                                                     "enters the repository)")
    args = p.parse_args(argv)
    target = Path(args.dir).resolve()
    try:
        if args.project and target.is_relative_to(Path(args.project).resolve()):
            raise UsageError(f"{args.dir} is inside the project checkout {args.project}; a secret key never "
                             f"goes into the repository: name a directory outside it")
        key = generate()
        secret, public = write_key_pair(target, key)
    except (UsageError, BadFile) as e:
        sys.stderr.write(f"ci/keygen: {e}\n")
        return 2 if isinstance(e, UsageError) else 1
    sys.stdout.write(f"secret key: {secret} (keep it secret: store its content as the release workflow's "
                     f"{ENV_KEY} secret)\npublic key: {public} (key id {key.id}; ship it as "
                     f"superfluid/keys/<name>.pub)\nverify a file with: minisign -Vm FILE -P {key.public().base64}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
