"""A baseRT engine release's assets, made from a built libbaseRT (``ci/engine-assets``).

See docs/release.md, "baseRT engine releases".
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import sys
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from superfluid.manifest.command_line import ManifestParser, report_written
from superfluid.manifest.release_files import SHA256_SUFFIX, sha256_line
from superfluid.manifest.settings import read_settings
from superfluid.runtime.basert.bundles import default_backend, parse_bundle_name
from superfluid.runtime.basert.config import CONFIG_SIZE
from superfluid.runtime.basert.loader import dlopen, probe
from superfluid.runtime.basert.verdict import judge
from superfluid.runtime.hostfacts.elf import ELFInvalid
from superfluid.runtime.hostfacts.needs import NEEDS_SUFFIX, measure_files
from superfluid.runtime.kernel.errors import SuperfluidError, UsageError, guarded

__all__ = ["EngineRefused", "LibraryFacts", "Written", "bundle_name", "abi_asset_name", "library_facts",
           "needs_text", "write_assets", "main"]

_PROG = "ci/engine-assets"
_BACKEND = re.compile(r"^[a-z][a-z0-9_.]*$")


class EngineRefused(SuperfluidError):
    """The library is not a baseRT library, or not of the version the release is made for."""


@dataclass(frozen=True, slots=True)
class LibraryFacts:
    """What a libbaseRT states about itself, and this superfluid's verdict on it."""

    path: str
    version: str
    abi: int | None  # the stated ABI number; None when unnumbered
    driven: str | None  # None when this superfluid drives it, else why not


@dataclass(frozen=True, slots=True)
class Written:
    """The files one run wrote, in order, and the facts they were made from."""

    facts: LibraryFacts
    files: tuple[Path, ...]


def bundle_name(platform: str, version: str, backend: str | None = None) -> str:
    """``basert-engine-<platform>[-<backend>]-<version>.tar.gz``, checked by reading it back.

    Raises:
        UsageError: the name does not read back as the same platform, backend and version.
    """
    if backend is not None and not _BACKEND.match(backend):
        raise UsageError(f"--backend {backend!r}: a backend is lower-case letters, digits, '_' and '.'")
    name = f"basert-engine-{platform}{f'-{backend}' if backend else ''}-{version}.tar.gz"
    read = parse_bundle_name(name)
    want = backend or (default_backend(platform) if read else None)
    if read is None or (read.platform, read.backend, read.version) != (platform, want, version):
        raise UsageError(f"{name} is not a baseRT bundle name an install reads (platform linux|macos-x64|arm64, "
                         f"version MAJOR.MINOR.PATCH): check --platform, --backend and --version")
    return name


def abi_asset_name(abi: int) -> str:
    """``basert-engine-abi-<N>.txt``."""
    return f"basert-engine-abi-{abi}.txt"


def library_facts(path: str) -> LibraryFacts:
    """Load the library at ``path`` and read what it states, through the runtime's loader probe
    (symbols, version string, ``baseRT_abi_version``) and verdict.

    Raises:
        LibraryRefused: it cannot be loaded.
        EngineRefused: it lacks a bound symbol (not a baseRT library).
    """
    full = os.path.abspath(path)
    facts, _ = probe(dlopen(full), full)
    verdict = judge(facts, CONFIG_SIZE)
    refusal = verdict.refusal.message if verdict.refusal is not None else None
    if facts.missing is not None or facts.version is None:
        raise EngineRefused(f"{full}: not a baseRT library ({refusal or 'no version string'})")
    return LibraryFacts(full, facts.version, facts.abi, refusal)


def _bundle(members: Mapping[str, bytes], mtime: int) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.uid, info.gid, info.uname, info.gname = len(data), mtime, 0, 0, "", ""
            info.mode = 0o755 if name.endswith((".so", ".dylib")) or ".so." in name else 0o644
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def needs_text(paths: Sequence[str]) -> str:
    """``<bundle>.needs.json``: what the bundle's shared objects need of a Linux host (``needs.measure_files``).

    Raises:
        EngineRefused: a shared object that is not an ELF file the loader could read.
    """
    try:
        needs = measure_files(paths)
    except ELFInvalid as e:
        raise EngineRefused(f"cannot read what the bundle needs: {e}") from None
    doc = needs.to_json()
    doc.pop("files", None)  # which file needs what is for messages, not for the release
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise UsageError(f"{path}: cannot be read ({e.strerror or e})") from None


def write_assets(lib: str, *, platform: str, version: str, out: Path, backend: str | None = None,
                 add: Sequence[str] = (), mtime: int = 0) -> Written:
    """Write the release assets of the library at ``lib`` into ``out`` (created when missing).

    Raises:
        UsageError: a bad name part, an unreadable file, or a file of that name already in ``out``.
        EngineRefused: not a baseRT library, or it states another version than ``version``.
        LibraryRefused: it cannot be loaded.
    """
    name = bundle_name(platform, version, backend)
    members = {os.path.basename(lib): _read(lib)} | {os.path.basename(p): _read(p) for p in add}
    facts = library_facts(lib)
    if facts.version != version:
        raise EngineRefused(f"{facts.path} states version {facts.version!r}, and this release is {version!r}: "
                            f"build the library of that version, or give --version {facts.version}")
    files = {name: _bundle(members, mtime)}
    files[name + SHA256_SUFFIX] = sha256_line(name, hashlib.sha256(files[name]).hexdigest()).encode("ascii")
    if platform.startswith("linux-"):  # what it needs of a host, checked before it is downloaded
        files[name + NEEDS_SUFFIX] = needs_text([lib, *add]).encode("ascii")
    if facts.abi is not None:
        files[abi_asset_name(facts.abi)] = f"{facts.abi}\n".encode("ascii")
    clash = [n for n in files if (out / n).exists()]
    if clash:
        raise UsageError(f"{out} already holds {', '.join(clash)}; write a release into a fresh directory")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for n, data in files.items():
        (out / n).write_bytes(data)
        written.append(out / n)
    return Written(facts, tuple(written))


def _parser() -> argparse.ArgumentParser:
    p = ManifestParser(prog=_PROG,
                       description="Write a baseRT release's assets from a built libbaseRT: the bundle, its "
                                         ".sha256, on Linux its .needs.json (the newest GLIBC_/GLIBCXX_ versions "
                                         "and the libraries it needs of a host) and basert-engine-abi-<N>.txt with "
                                         "the number the library states.")
    p.epilog = ("Then the engine's release workflow attests the bundle, its .needs.json and the ABI asset "
                "(actions/attest-build-provenance) and uploads each one's Sigstore bundle beside it as "
                "<asset>.sigstore.json: docs/release.md, \"Attesting an engine's release\".")
    p.add_argument("--lib", required=True, metavar="PATH", help="the built libbaseRT (.so or .dylib)")
    p.add_argument("--platform", required=True, metavar="P", help="linux-x64, linux-arm64, macos-arm64 ...")
    p.add_argument("--version", required=True, metavar="V", help="the release's version; the library must state it")
    p.add_argument("--backend", metavar="B", help="cuda, vulkan ... (leave out for the platform's own engine)")
    p.add_argument("--add", action="append", default=[], metavar="FILE", help="also put FILE in the bundle")
    p.add_argument("--out", required=True, metavar="DIR", help="where to write the assets")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``ci/engine-assets``: 0 written; 1 the library is refused; 2 a usage error."""
    return guarded(_PROG, lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    epoch = read_settings(os.environ).source_date_epoch
    done = write_assets(args.lib, platform=args.platform, version=args.version, backend=args.backend,
                        out=Path(args.out), add=args.add, mtime=int(epoch) if epoch.isdigit() else 0)
    f = done.facts
    stated = f"states ABI {f.abi}" if f.abi is not None else "states no ABI number (no ABI asset written)"
    driven = "this superfluid drives it" if f.driven is None else f"this superfluid refuses it: {f.driven}"
    return report_written(_PROG, f"libbaseRT {f.version} {stated}; {driven}", done.files)


if __name__ == "__main__":
    sys.exit(main())
