"""Release folders as ``ci/pack --out DIR`` writes them, made without building wheels: an sdist and a
wheel stand-in, each with the ``.sha256``, ``.compat.json`` and ``.compat.json.minisig`` that
``manifest.pack``'s own sidecar writer puts beside it, signed with a key from
``manifest.minisign.generate()``. The compat document is this checkout's (every adapter's
``compat()``), varied per release: the baseRT ABI it drives and its unnumbered line, the llama.cpp
builds it was tested with, the MLX versions."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from superfluid.installer.trust.identity import Identity
from superfluid.manifest.compat import build, release_info
from superfluid.manifest.minisign import SecretKey
from superfluid.manifest.pack import _sidecars
from superfluid.runtime import registry

__all__ = ["base_document", "vary", "write_release", "TIMESTAMP"]

TIMESTAMP = 1_767_225_600  # the trusted comment's timestamp: fixed, so folders are reproducible
NAME = "superfluid-toolchain"


def base_document() -> dict[str, Any]:
    """This checkout's compat document (what ``superfluid compat --json`` answers, in process)."""
    parts = {rid: registry.get(rid).compat() for rid in registry.IDS}
    return build(release_info(NAME, "0.0.0"), parts)


def vary(doc: dict[str, Any], version: str, *, abi: int | None = None, line: str | None | bool = False,
         builds: Sequence[tuple[str, str]] | None = None, mlx: Sequence[str] | None = None,
         drop: Sequence[str] = ()) -> dict[str, Any]:
    """A copy of ``doc`` stating ``version``, driving baseRT ``abi`` (its pins follow: ABI N's pins
    state N) with unnumbered line ``line`` (False: unchanged), tested with llama.cpp ``builds``
    (``(build, layout)``) and MLX ``mlx``; the runtimes in ``drop`` removed."""
    out = copy.deepcopy(doc)
    out["release"]["version"] = version
    runtimes = out["runtimes"]
    if abi is not None:
        runtimes["basert"]["requires"]["abi"] = abi
        runtimes["basert"]["installs"] = [{**p, "abi": abi} for p in runtimes["basert"]["installs"]
                                          if p["abi"] is not None] if abi != 1 else runtimes["basert"]["installs"]
    if line is not False:
        runtimes["basert"]["unnumbered_line"] = line
    if builds is not None:
        runtimes["llamacpp"]["tested"] = [{"build": b, "layout": layout} for b, layout in builds]
    if mlx is not None:
        runtimes["mlx"]["installs"] = [{**runtimes["mlx"]["installs"][0], "mlx": v} for v in mlx]
    for rid in drop:
        del runtimes[rid]
    return out


def write_release(root: Path, folder: str, doc: dict[str, Any], key: SecretKey | None,
                  attested: Identity | None = None) -> Path:
    """``root/folder``: the sdist and the wheel of ``doc``'s version with their sidecars (as
    ``ci/pack``'s own writer makes them; no ``.minisig`` when ``key`` is None; each document stating
    ``attested`` when given, as ``ci/pack --attested`` writes it)."""
    version = doc["release"]["version"]
    out = root / folder
    out.mkdir(parents=True)
    for name in (f"superfluid_toolchain-{version}.tar.gz", f"superfluid_toolchain-{version}-py3-none-any.whl"):
        artifact = out / name
        artifact.write_bytes(f"{name}: the artifact's bytes\n".encode())
        _sidecars(artifact, doc, key, TIMESTAMP, attested)
    return out
