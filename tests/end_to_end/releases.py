"""Fixture releases of baseRT made from the reference engine's variants (SPEC §11).

Each release ``v<version>`` carries ``basert-engine-<platform>-<version>.tar.gz`` (``libbaseRT.so``
of that variant, built by ``tests/engines/basert/build.sh``, and a ``LICENSE``), its ``.sha256``
beside it, and from 0.3.1 on ``basert-engine-abi-<N>.txt``. Archives are byte-for-byte
reproducible (fixed times, owners and order), so digests are stable between runs.

As a program it writes a mirror directory the installer reads with ``--mirror DIR``::

    python -m tests.end_to_end.releases DIR      # (scripts/make-mirror DIR)
"""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from tests.conftest import ROOT, native_cache
from tests.release_server import ReleaseServer

__all__ = ["REPO", "STANDARD", "engine_lib", "bundle_name", "bundle", "release_assets", "publish", "make_mirror",
           "build_engines", "libllama_archive"]

REPO = "basecompute/baseRT"
#: (version, ABI number its release states or None), oldest first: the reference variants
STANDARD: tuple[tuple[str, int | None], ...] = (("0.2.6", None), ("0.3.0", None), ("0.3.1", 1), ("0.4.0", 1),
                                               ("0.5.0", 2))
_MTIME = 1_767_225_600  # 2026-01-01T00:00:00Z
_LIB = "libbaseRT.dylib" if sys.platform == "darwin" else "libbaseRT.so"


def build_engines() -> Path:
    """Build the reference engine's variants (idempotent); answers their directory."""
    subprocess.run(["sh", str(ROOT / "tests" / "engines" / "basert" / "build.sh")], check=True,
                   stdout=subprocess.DEVNULL)
    return native_cache() / "basert"


def engine_lib(variant: str) -> Path:
    """The reference engine library of ``variant`` (``0.4.0``, ``missing-symbol`` ...)."""
    path = native_cache() / "basert" / variant / _LIB
    if not path.is_file():
        build_engines()
    return path


def host_platform() -> str:
    from superfluid.runtime.hostfacts.host import detect

    return detect({}).platform


def bundle_name(version: str, platform: str | None = None) -> str:
    return f"basert-engine-{platform or host_platform()}-{version}.tar.gz"


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, _MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(data))


def bundle(variant: str, *, padding: int = 0, extra: Mapping[str, bytes] | None = None) -> bytes:
    """A reproducible ``.tar.gz`` holding the variant's library (flat, as baseRT ships it), a
    ``LICENSE`` and, with ``padding``, a file of that many incompressible bytes (for benchmarks)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, _LIB, engine_lib(variant).read_bytes(), 0o755)
        _add(tar, "LICENSE", b"reference engine for superfluid's tests; not baseRT\n", 0o644)
        if padding:
            _add(tar, "kernels.bin", _noise(padding), 0o644)
        for name, data in (extra or {}).items():
            _add(tar, name, data, 0o644)
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=6) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def _noise(n: int) -> bytes:
    """``n`` deterministic, incompressible bytes."""
    import hashlib

    block = b"".join(hashlib.sha256(i.to_bytes(8, "little")).digest() for i in range(1 << 12))  # 128 KiB
    reps, rest = divmod(n, len(block))
    # vary each repetition so gzip cannot fold them
    return b"".join(bytes([(i * 7) & 0xFF]) + block[1:] for i in range(reps)) + block[:rest]


def release_assets(version: str, abi: int | None, *, variant: str | None = None, platform: str | None = None,
                   abi_text: str | None = None) -> dict[str, bytes]:
    """The assets of one fixture release (``.sha256`` files are added by the server)."""
    assets = {bundle_name(version, platform): bundle(variant or version)}
    if abi is not None:
        assets[f"basert-engine-abi-{abi}.txt"] = (abi_text if abi_text is not None else f"{abi}\n").encode()
    return assets


def publish(server: ReleaseServer, releases: Iterable[tuple[str, int | None]] = STANDARD, *,
            platform: str | None = None) -> None:
    """Publish fixture releases (oldest first, so the last is listed newest)."""
    for version, abi in releases:
        server.add_release(REPO, f"v{version}", release_assets(version, abi, platform=platform), sha256_files=True)


def make_mirror(root: str | os.PathLike[str], *, platform: str | None = None) -> Path:
    """Write the standard fixture releases as a mirror directory (``--mirror DIR``)."""
    server = ReleaseServer()  # never started: its state is written as files
    publish(server, platform=platform)
    return server.write_mirror(root)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python -m tests.end_to_end.releases DIR\n")
        return 2
    root = make_mirror(argv[0])
    print(f"mirror of baseRT {', '.join(v for v, _ in STANDARD)} for {host_platform()} in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def libllama_archive(lib_dir: Path, top: str | None = None) -> bytes:
    """A ``.tar.gz`` of the libllama/libggml files of ``lib_dir`` (symlinks kept), flat or under the
    folder ``top`` (``llama-<tag>``, as upstream's release archives are)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        if top is not None:
            folder = tarfile.TarInfo(top)
            folder.type, folder.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(folder)
        for path in sorted(lib_dir.iterdir()):
            if not path.name.startswith(("libllama", "libggml")):
                continue
            info = tarfile.TarInfo(path.name if top is None else f"{top}/{path.name}")
            info.mtime = 1_767_225_600
            if path.is_symlink():
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
                tar.addfile(info)
            else:
                data = path.read_bytes()
                info.size, info.mode = len(data), 0o755
                tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()
