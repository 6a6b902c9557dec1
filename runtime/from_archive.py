"""The plan of ``--from URL|PATH``: one plan for exactly the archive named, read from its name.

See docs/install.md, "`--from FILE|URL`".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from superfluid.runtime.digests import expected_digest
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.planning import NotInstallable, Plan, PlanAsset, Request, Sha256, is_local

if TYPE_CHECKING:
    from superfluid.runtime.hostfacts.host import Host

__all__ = ["NameFacts", "plan_from"]


@dataclass(kw_only=True, frozen=True, slots=True)
class NameFacts:
    """What an archive's file name says (each None when it does not say), and what the adapter's
    recipe knows of that version: the file's pinned digest and size, its ABI, the facts a plan of
    it carries, and whether it is tested (True: a library the probe finds driven is)."""

    platform: str | None = None
    backend: str | None = None
    version: str | None = None
    pin: Sha256 | None = None
    size: int | None = None
    abi: int | None = None
    facts: Mapping[str, Any] = field(default_factory=dict)
    tested: bool = True


def plan_from(request: Request, host: Host, read_name: Callable[[str, str | None], NameFacts], *,
              default_backend: str) -> Plan:
    """``--from URL|PATH``: one plan for exactly that archive.

    Version = ``--version``, else read from the name, else ``custom``; backend = ``--backend``,
    else the name's, else ``default_backend``. A name for another platform is refused. The digest
    is ``--sha256``, else the recipe's pin for exactly this file name, else none: a local file then
    installs with a warning and its computed digest recorded; a remote one is refused. The probe of
    the staged library decides whether it is driven; ``tested`` is false with ``--untested`` or for
    a version the adapter knows untested; ``chosen_by`` is ``"from"``.

    ``read_name(name, version)`` is the adapter's reading of the file name, for the version the
    request names (None: the name's own).

    Raises:
        NotInstallable: the archive is for another platform, or remote without a digest.
        DigestConflict: ``--sha256`` disagrees with the pin for that file.
        UsageError: ``--version`` disagrees with the version in the archive's name.
    """
    src = request.from_ or ""
    name = src.rstrip("/").rsplit("/", 1)[-1]
    said = read_name(name, request.version)
    if said.platform is not None and said.platform != host.platform:
        raise NotInstallable(f"{src} is built for {said.platform}; this is {host.describe()}")
    if request.version and said.version and request.version != said.version:
        raise UsageError(f"--version {request.version} disagrees with {name}, which is version {said.version}")
    version = request.version or said.version or "custom"
    backend = request.backend or said.backend or default_backend
    sha, source, checked = expected_digest(name, pin=said.pin, flag=request.sha256, local=is_local(src))
    asset = PlanAsset(name=name, url=src, sha256=sha, size=said.size, digest_source=source, checked=checked,
                      pin=said.pin)
    why = f"{src}, as named" + ("" if sha else " (no digest given: its computed SHA-256 is recorded)")
    return Plan(id=request.id, version=version, backend=backend, assets=(asset,),
                tested=said.tested and not request.untested, chosen_by="from", abi=said.abi, why=why,
                platform=host.platform, facts=said.facts)
