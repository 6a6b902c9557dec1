"""The digest policy: which SHA-256 an asset must have, and from which statements.

See docs/install.md, "Verifying".
"""

from __future__ import annotations

from dataclasses import replace

from superfluid.runtime.kernel.errors import InconsistentRelease
from superfluid.runtime.planning import DigestConflict, NotInstallable, PlanAsset, Sha256, is_local, parse_sha256

__all__ = ["api_sha256", "parse_sha256_file", "expected_digest", "settle_asset"]


def api_sha256(digest: str | None) -> Sha256 | None:
    """The hex of a listing's ``digest`` (``"sha256:<hex>"``); None for none or another algorithm."""
    if not digest:
        return None
    algo, _, hexdigest = digest.partition(":")
    if not hexdigest:
        algo, hexdigest = "sha256", algo
    return parse_sha256(hexdigest) if algo.strip().lower() == "sha256" else None


def parse_sha256_file(repo: str, tag: str, name: str, text: str) -> Sha256:
    """The digest a ``<name>.sha256`` states: ``<64 hex>  <name>`` (``sha256sum``'s line; a lone
    digest is accepted too, and a ``*`` before the name).

    Raises:
        InconsistentRelease: it holds no 64-hex digest first, or names another file.
    """
    words = text.split()
    digest = parse_sha256(words[0]) if words and not words[0].lower().startswith("sha256:") else None
    if digest is None:
        raise InconsistentRelease(repo, tag, "holds no SHA-256 (expected '<64 hex>  <name>')", asset=f"{name}.sha256")
    if len(words) > 1 and words[1].lstrip("*") != name:
        raise InconsistentRelease(repo, tag, f"is the digest of {words[1]!r}, not of {name!r}", asset=f"{name}.sha256")
    return digest


def expected_digest(name: str, *, pin: Sha256 | None = None, flag: Sha256 | None = None,
                    sidecar: Sha256 | None = None, api: Sha256 | None = None, local: bool = False,
                    sidecar_pending: bool = False, require_sidecar: bool = False,
                    where: tuple[str, str] = ("", "")) -> tuple[Sha256 | None, str, tuple[str, ...]]:
    """The digest an asset must have, where it comes from, and what it was agreed against.

    - A pinned asset must match its pin, and the listing's digest when it gives one; a ``--sha256``
      that differs from the pin is an error (a pin is never overridden), as is a ``.sha256``.
    - An unpinned asset must match every statement present: the release's ``<name>.sha256``, the
      listing's digest and ``--sha256``; any two that disagree are fatal, naming both values.
    - An unpinned remote asset with no statement at all is refused (nothing from the network is
      installed unverified); a local file with none installs, its computed digest recorded:
      ``(None, "computed", ())``.
    - ``require_sidecar`` (baseRT, which publishes one beside every bundle): an unpinned asset
      without ``--sha256`` needs its ``<name>.sha256``; the listing's digest alone is not enough.
    - ``sidecar_pending``: the ``.sha256`` is published but not read yet; the answer is provisional
      and the caller settles it once read (``settle_asset``).

    Raises:
        DigestConflict: ``--sha256`` disagrees with the pin or with the release.
        InconsistentRelease: the pin, the listing's digest and the ``.sha256`` disagree.
        NotInstallable: a remote asset with no digest from any statement.
    """
    repo, tag = where
    if pin is not None:
        if flag is not None and flag != pin:
            raise DigestConflict(name, flag, pin, "the pin of this superfluid's recipe")
        for other, what in ((api, "the listing's digest"), (sidecar, f"{name}.sha256")):
            if other is not None and other != pin:
                raise InconsistentRelease(repo, tag, f"{what} is {other}, and this superfluid pins {pin}",
                                          asset=name, expected=pin, got=other,
                                          advice="nothing was installed: the source serves other bytes than pinned")
        checked = ("pin",) + (("api",) if api else ()) + (("release",) if sidecar else ())
        return pin, "pin", checked
    if sidecar is not None and api is not None and sidecar != api:
        raise InconsistentRelease(repo, tag, f"{name}.sha256 states {sidecar}, and the listing's digest is {api}",
                                  asset=name, expected=sidecar, got=api,
                                  advice="the release contradicts itself; nothing of it was installed")
    if flag is not None:
        for other, what in ((sidecar, f"the release's {name}.sha256"), (api, "the listing's digest")):
            if other is not None and other != flag:
                raise DigestConflict(name, flag, other, what)
        checked = ("flag",) + (("release",) if sidecar else ()) + (("api",) if api else ())
        return flag, "flag", checked
    if sidecar is not None:
        return sidecar, "release", ("release",) + (("api",) if api else ())
    if sidecar_pending:
        return api, "release", ("api",) if api else ()
    if require_sidecar and not local:
        raise NotInstallable(
            f"{name}: the release publishes no {name}.sha256 beside it, and no pin names its digest",
            advice="check the file's SHA-256 with its publisher and pass it with --sha256")
    if api is not None:
        return api, "api", ("api",)
    if local:
        return None, "computed", ()
    raise NotInstallable(
        f"{name}: no SHA-256 to check it against (no pin, no {name}.sha256 beside it, no digest in the listing), "
        "and only a file on this machine is installed unchecked",
        advice="check the file's SHA-256 with its publisher and pass it with --sha256",
    )


def settle_asset(asset: PlanAsset, sidecar_text: str | None, *, flag: Sha256 | None = None,
                 where: tuple[str, str] = ("", "")) -> PlanAsset:
    """The asset with its final expected digest once its ``.sha256`` (named by ``asset.sidecar``) was
    read: ``sidecar_text`` is its content.

    Raises:
        InconsistentRelease: the ``.sha256`` is listed but was not read (``sidecar_text`` None).
        DigestConflict, NotInstallable: as ``expected_digest``; as ``parse_sha256_file``.
    """
    if asset.sidecar and sidecar_text is None:
        raise InconsistentRelease(where[0], where[1], f"lists {asset.name}.sha256, and it could not be read",
                                  asset=asset.name)
    sidecar = parse_sha256_file(where[0], where[1], asset.name, sidecar_text) if sidecar_text is not None else None
    sha, source, checked = expected_digest(asset.name, pin=asset.pin, flag=flag, sidecar=sidecar,
                                           api=asset.api_sha256, local=is_local(asset.url), where=where)
    return replace(asset, sha256=sha, digest_source=source, checked=checked, sidecar=None)
