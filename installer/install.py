"""The install workflow, in the order SPEC §8 states it (``superfluid runtime install <id>``).

1. Build the release source (``--mirror``, ``--offline`` or GitHub; ``sources.source_for``).
2. List the runtime's releases and read the small facts the rules need (ABI assets), each checked
   against the listing's digest where it gives one and kept in the cache by content.
3. Resolve the ordered plans (``resolver``), then settle each unpinned asset's digest against the
   release's ``<asset>.sha256`` (SPEC §8.2: every statement present must agree).
4. ``--dry-run`` stops here: the plans are the answer and nothing was changed.
5. Download and verify every asset of the first plan (``download``: content-addressed cache,
   streaming sha256, resume, retries) — before any lock is taken.
6. Stage, extract, probe and publish (``publish.install_staged``, under the runtime's lock): the
   archives are extracted into ``<staging>/lib``, the staged library is checked by the adapter's
   worker in a subprocess (``bin/superfluid-worker-<id> check``), the receipt records what the
   probe found, and only then is the staging renamed into place and ``current`` swapped.
7. A plan whose probe refuses is recorded and the next plan is tried (a GPU build that finds no
   device falls back to the next backend); when every plan is refused, nothing was installed.
   The check's report is judged by ``probe.judge_probe`` (which also states what ``--untested``
   allows).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from superfluid.installer.errors import InconsistentRelease, ReleaseNotFound
from superfluid.installer.probe import Probed, ProbeRefused, probe
from superfluid.installer.resolver import (
    AssetLike,
    NotInstallable,
    Plan,
    PlanAsset,
    Request,
    abi_assets_needed,
    api_sha256,
    expected_digest,
    is_local,
    resolve,
    settle_asset,
)
from superfluid.runtime.errors import UsageError

if TYPE_CHECKING:
    from superfluid.installer.download import Download, Progress
    from superfluid.installer.publish import Published
    from superfluid.installer.sources import Release, ReleaseSource
    from superfluid.runtime.host import Host
    from superfluid.runtime.receipt import Receipt

__all__ = ["Outcome", "install", "plan", "repo_of"]

_REPO = re.compile(r"/repos/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/releases")
Say = Callable[[str], None]


@dataclass(frozen=True)
class Outcome:
    """The answer of ``install``: the plans, and what was installed unless it was a dry run."""

    id: str
    plans: tuple[Plan, ...]
    dry_run: bool
    source: str
    receipt: Receipt | None = None
    path: str | None = None
    replaced: bool = False
    current: str | None = None
    pinned: str | None = None
    fallbacks: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = ()
    cleaned: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        """``--json``: the plans for ``--dry-run`` (schema ``plan``), else the install result
        (schema ``install-result``)."""
        out: dict[str, Any] = {"id": self.id, "dry_run": self.dry_run, "source": self.source,
                               "plans": [p.to_json() for p in self.plans]}
        if not self.dry_run:
            out.update(installed=self.receipt.install if self.receipt else None,
                       receipt=self.receipt.to_json() if self.receipt else None, path=self.path,
                       replaced=self.replaced, current=self.current, pinned=self.pinned,
                       fallbacks=[{"install": i, "why": w} for i, w in self.fallbacks])
        out["warnings"] = list(self.warnings)
        return out


# -- 1-3: source, listing, plans ----------------------------------------------------------------------


def repo_of(recipe: Mapping[str, Any], runtime_id: str) -> str:
    """``owner/name`` of the GitHub repository a recipe's ``releases`` or ``api`` URL names.

    Raises:
        NotInstallable: the recipe names no releases repository.
    """
    for key in ("releases", "api"):
        m = _REPO.search(str(recipe.get(key) or ""))
        if m:
            return m.group(1)
    raise NotInstallable(f"the {runtime_id} recipe names no releases repository")


def _read_text(source: ReleaseSource, asset: AssetLike, *, repo: str, tag: str) -> str:
    """A small asset's text, checked against the listing's digest when it gives one (with that
    digest ``ReleaseSource.read`` answers from the cache by content, and no request is made).

    Raises:
        InconsistentRelease: the bytes are not the ones the listing's digest names, or not text.
        DownloadError, OfflineMissing, SizeExceeded: as ``ReleaseSource.read``.
    """
    from superfluid.installer.github import Asset

    listed = asset if isinstance(asset, Asset) else Asset(asset.name, asset.url, asset.size, asset.digest)
    data = source.read(listed)
    want = api_sha256(asset.digest)
    got = hashlib.sha256(data).hexdigest()
    if want and got != want:
        raise InconsistentRelease(repo, tag, f"its bytes have SHA-256 {got}, and the listing's digest is {want}",
                                  asset=asset.name, expected=want, got=got)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InconsistentRelease(repo, tag, "is not UTF-8 text", asset=asset.name) from None


def _basert_plans(request: Request, recipe: Mapping[str, Any], host: Host, source: ReleaseSource,
                  repo: str) -> tuple[list[Plan], list[Release]]:
    from superfluid.runtime.basert import header

    releases = source.releases(repo)
    texts = {(rel.tag, a.name): _read_text(source, a, repo=repo, tag=rel.tag)
             for rel, a in abi_assets_needed(recipe, releases, host.platform)}
    plans = resolve(request, recipe, host, releases, texts, drives=header.ABI_VERSION, line=header.UNNUMBERED_LINE,
                    repo=repo, url_for=lambda tag, name: source.asset_url(repo, tag, name))
    return plans, releases


def _llamacpp_plans(request: Request, recipe: Mapping[str, Any], host: Host, source: ReleaseSource,
                    repo: str) -> tuple[list[Plan], list[Release]]:
    """llama.cpp by the recipe's tested builds, through the adapter's planner (SPEC §4.2). The
    build's release is read for its download URLs and digests (the recipe pins none); a build not
    tested is planned from it only with ``--untested``.

    Raises:
        NotInstallable: the planner's refusal, or the release is not published.
    """
    from superfluid.runtime.llamacpp import planner
    from superfluid.runtime.llamacpp.recipe import tested

    builds = tested(dict(recipe))
    version = request.version or builds[0].version
    try:
        if version in {b.version for b in builds} or not request.untested:
            first = planner.plan(request, recipe, host, ())  # the rules first: refused before any request
        else:
            first = []
        # each planned build's release, for its download URLs and listed digests (the newest first;
        # an older tested build is a fallback only, so its release may be missing from a mirror)
        wanted = list(dict.fromkeys([version, *(p["version"] for p in first)]))
        releases = [source.release(repo, version)]
        for other in wanted[1:]:
            try:
                releases.append(source.release(repo, other))
            except ReleaseNotFound:
                continue
        raw = [p for p in planner.plan(request, recipe, host, releases)
               if p["version"] in {r.tag for r in releases}]
    except planner.PlanRefused as e:
        raise NotInstallable(str(e)) from None
    listed = {a.name: a for rel in releases for a in rel.assets}
    plans = []
    for p in raw:
        assets = []
        for i, a in enumerate(p["assets"]):
            api = api_sha256(listed[a["name"]].digest) if a["name"] in listed else None
            pin = a.get("sha256") if p["tested"] else None
            sha, src, checked = expected_digest(a["name"], pin=pin, flag=request.sha256 if i == 0 else None,
                                                api=api, where=(repo, version))
            size = a.get("size") if a.get("size") is not None else (listed[a["name"]].size if a["name"] in listed
                                                                      else None)
            assets.append(PlanAsset(a["name"], a["url"], sha, size, src, checked, None, api, pin))
        plans.append(Plan("llamacpp", p["version"], p["backend"], tuple(assets), bool(p["tested"]),
                          "tested" if p["tested"] else "untested", None, p["why"], host.platform,
                          {"layout": p["layout"]} if p.get("layout") else None))
    return plans, releases


def _mlx_plans(request: Request, host: Host) -> list[Plan]:
    """MLX runs on Apple silicon only (SPEC §4.3): elsewhere a clear refusal.

    Raises:
        NotInstallable: always on a host other than macOS arm64; on one, the install of wheels
            into a private Python is not part of this toolchain yet.
    """
    if host.platform != "macos-arm64":
        raise NotInstallable(f"MLX runs on Apple silicon only; this is {host.describe()}: nothing of mlx installs here",
                             fix="`superfluid runtime versions mlx` lists the tested versions and why")
    raise NotInstallable("installing MLX (a private Python with pinned wheels) is not done by this toolchain yet",
                         fix="install mlx and mlx-lm into a Python 3.12 virtual environment and name it with "
                             "--mlx-venv on serve")


def _settle(plans: Sequence[Plan], releases: Sequence[Release], source: ReleaseSource, request: Request,
            repo: str) -> list[Plan]:
    """Read each planned asset's ``.sha256`` and fix the digest it must have (SPEC §8.2)."""
    by_url = {a.url: (rel, a) for rel in releases for a in rel.assets}
    out = []
    for p in plans:
        assets = []
        for a in p.assets:
            if a.sidecar:
                rel, side = by_url[a.sidecar]
                text = _read_text(source, side, repo=repo, tag=rel.tag)
                a = settle_asset(a, text, flag=request.sha256, where=(repo, rel.tag))
            assets.append(a)
        out.append(replace(p, assets=tuple(assets)))
    return out


def plan(request: Request, *, environ: Mapping[str, str], mirror: str | None = None, offline: bool = False,
         host: Host | None = None, source: ReleaseSource | None = None) -> tuple[list[Plan], str, ReleaseSource | None]:
    """Steps 1-3: the ordered plans, a description of where they come from, and the source.

    Raises:
        UsageError: an unknown runtime, a bad ``--mirror``, a ``--from`` path that does not exist.
        NotInstallable, InconsistentRelease, DigestConflict: the rules' refusals.
        DownloadError, RateLimited, OfflineMissing, ReleaseNotFound, BadFile: reading the listing.
    """
    from superfluid.runtime import registry
    from superfluid.runtime.host import detect

    adapter = registry.get(request.id)
    recipe = adapter.recipe
    host = host or detect(environ)
    if request.from_:
        return resolve(request, recipe, host, drives=_drives(request.id), line=_line(request.id),
                       planner=_from_planner), request.from_, None
    if request.id == "mlx":
        return _mlx_plans(request, host), "the mlx recipe", None
    if source is None:
        from superfluid.installer.sources import source_for

        source = source_for(mirror=mirror, offline=offline, environ=environ,
                            fix=f"run `superfluid runtime install {request.id}` once without --offline")
    repo = repo_of(recipe, request.id)
    if request.id == "basert":
        plans, releases = _basert_plans(request, recipe, host, source, repo)
    elif request.id == "llamacpp":
        plans, releases = _llamacpp_plans(request, recipe, host, source, repo)
    else:
        raise NotInstallable(f"this superfluid has no installer for the {request.id} runtime")
    return _settle(plans, releases, source, request, repo), source.describe(), source


def _drives(runtime_id: str) -> int | None:
    if runtime_id != "basert":
        return None
    from superfluid.runtime.basert import header

    return header.ABI_VERSION


def _line(runtime_id: str) -> str | None:
    if runtime_id != "basert":
        return None
    from superfluid.runtime.basert import header

    return header.UNNUMBERED_LINE


def _from_planner(request: Request, recipe: Mapping[str, Any], host: Any, releases: Sequence[Any]) -> list[Plan]:
    """``--from`` for a runtime other than basert: the adapter's planner, as one plan."""
    if request.id != "llamacpp":
        raise NotInstallable(f"--from installs basert or llamacpp archives, not {request.id}")
    from superfluid.runtime.llamacpp import planner

    try:
        raw = planner.plan(request, recipe, host, releases)[0]
    except planner.PlanRefused as e:
        raise NotInstallable(str(e)) from None
    a = raw["assets"][0]
    sha, src, checked = expected_digest(a["name"], pin=a.get("sha256") if a.get("sha256") != request.sha256 else None,
                                        flag=request.sha256, local=is_local(a["url"]))
    asset = PlanAsset(a["name"], a["url"], sha, a.get("size"), src, checked)
    return [Plan("llamacpp", raw["version"], raw["backend"], (asset,), bool(raw["tested"]) and not request.untested,
                 "from", None, raw["why"], host.platform)]


# -- 5: download and verify --------------------------------------------------------------------------


def _fetch(p: Plan, source: ReleaseSource | None, *, environ: Mapping[str, str], progress: Progress | None,
           say: Say) -> list[tuple[PlanAsset, Path, str]]:
    """Every asset of ``p`` verified on disk: ``(asset, path, computed sha256)``, in plan order.

    A local ``--from`` file is hashed in place (and checked when a digest is known); a remote one
    goes through the cache like a release's. Nothing unverified is returned.

    Raises:
        VerificationError: bytes other than the digest names (nothing kept).
        DownloadError, OfflineMissing: the transfer failed, or a ``file://`` URL names another host.
        UsageError: a local file that does not exist.
    """
    from superfluid.installer.cache import sha256_file
    from superfluid.installer.errors import VerificationError
    from superfluid.installer.fetcher import path_of_file_url

    out: list[tuple[PlanAsset, Path, str]] = []
    remote: list[PlanAsset] = []
    for a in p.assets:
        if not is_local(a.url):
            remote.append(a)
            continue
        path = Path(path_of_file_url(a.url) if a.url.startswith("file://") else a.url)
        if not path.is_file():
            raise UsageError(f"--from {a.url}: no such file")
        got = sha256_file(path)
        if a.sha256 is not None and got != a.sha256:
            raise VerificationError(str(path), "sha256", a.sha256, got)
        if a.sha256 is None:
            say(f"warning: {path} has no SHA-256 to check it against: installing a local file unchecked "
                f"(its SHA-256 is {got})")
        out.append((a, path, got))
    if remote:
        done = _download(remote, source, environ=environ, progress=progress)
        out.extend((a, d.path, d.sha256) for a, d in zip(remote, done, strict=True))
    order = {a.name: i for i, a in enumerate(p.assets)}
    return sorted(out, key=lambda t: order[t[0].name])


def _download(assets: Sequence[PlanAsset], source: ReleaseSource | None, *, environ: Mapping[str, str],
              progress: Progress | None) -> list[Download]:
    from superfluid.installer.download import Wanted, download_many

    if source is None:  # --from URL: a fetcher for that URL, the home's cache
        from superfluid.installer.cache import Cache
        from superfluid.installer.sources import fetcher_for
        from superfluid.runtime.host import home

        fetcher = fetcher_for(assets[0].url, plain_http=True)
        cache = Cache.for_home(home(environ))
        try:
            return download_many([Wanted(a.url, a.sha256, a.size, a.name) for a in assets], cache=cache,
                                 fetcher=fetcher, progress=progress)
        finally:
            fetcher.close()
    from superfluid.installer.sources import Asset

    return source.fetch_many([(Asset(a.name, a.url, a.size), a.sha256) for a in assets], progress=progress)


# -- 6: probe ---------------------------------------------------------------------------------------------

# -- 6: stage, extract, publish -------------------------------------------------------------------------


def _receipt(p: Plan, fetched: Sequence[tuple[PlanAsset, Path, str]], probed: Probed) -> Receipt:
    from superfluid.runtime.receipt import Receipt, Source, now_utc, worker_path

    return Receipt(id=p.id, install=p.install, version=p.version, backend=p.backend, worker=worker_path(p.id),
                   platforms=(p.platform,) if p.platform else (),
                   sources=tuple(Source(a.url, sha) for a, _, sha in fetched), tested=probed.tested,
                   abi=probed.abi, chosen_by=p.chosen_by,  # type: ignore[arg-type]
                   installed_at=now_utc())


def _install_one(p: Plan, fetched: Sequence[tuple[PlanAsset, Path, str]], *, home: str,
                 environ: Mapping[str, str], untested: bool, say: Say) -> Published:
    from superfluid.installer.extract import extract_all
    from superfluid.installer.publish import install_staged

    def populate(staging: Path) -> Receipt:
        extract_all([path for _, path, _ in fetched], staging / "lib")
        probed = probe(p, staging, environ=environ, untested=untested)
        return _receipt(p, fetched, probed)

    def waiting(holder: Any) -> None:
        say(f"another install of {p.id} is running ({holder.describe()}); waiting for it")

    return install_staged(home, p.id, p.install, populate, lambda _staging: None, on_wait=waiting,
                          command=f"superfluid runtime install {p.id}")


def _size_mb(p: Plan) -> str:
    if not p.size:
        return ""
    return f", {p.size / 1e6:.1f} MB" if p.size >= 100_000 else f", {p.size / 1e3:.1f} kB"


def install(request: Request, *, environ: Mapping[str, str], mirror: str | None = None, offline: bool = False,
            dry_run: bool = False, say: Say | None = None, progress: Progress | None = None,
            host: Host | None = None, source: ReleaseSource | None = None) -> Outcome:
    """``superfluid runtime install``: plan, and unless ``dry_run``, download, verify, stage,
    probe and publish the first plan that runs here (see the module doc for the sequence).

    Raises:
        UsageError: as ``plan``.
        NotInstallable: the rules refuse, or every plan's probe refused (names each reason).
        InconsistentRelease, DigestConflict, VerificationError: SPEC §8.2 (nothing installed).
        DownloadError, OfflineMissing, ReleaseNotFound, BadFile: reading the source.
        UnsafeArchive, StoreError, LockBusy: extraction and the store (nothing installed).
    """
    from superfluid.runtime.host import home as home_of

    say = say or (lambda _text: None)
    plans, where, src = plan(request, environ=environ, mirror=mirror, offline=offline, host=host, source=source)
    try:
        if dry_run:
            return Outcome(request.id, tuple(plans), True, where)
        fallbacks: list[tuple[str, str]] = []
        warnings: list[str] = []

        def note(text: str) -> None:
            if text.startswith("warning: "):
                warnings.append(text[len("warning: "):])
            say(text)

        for i, p in enumerate(plans):
            lead = "installing" if i == 0 else "  then, if it does not run:"
            untested_note = "" if p.tested else " (UNTESTED with this superfluid)"
            say(f"{lead} {p.id} {p.install}: {p.why}{_size_mb(p)}{untested_note}")
            for a in p.assets:
                say(f"  from {a.url}")
            fetched = _fetch(p, src, environ=environ, progress=progress, say=note)
            try:
                published = _install_one(p, fetched, home=home_of(environ), environ=environ,
                                         untested=request.untested, say=say)
            except ProbeRefused as e:
                fallbacks.append((p.install, e.reason))
                if i + 1 < len(plans):
                    say(f"{p.id} {p.install} does not run here ({e.reason}); falling back to the next")
                    continue
                if len(plans) == 1:
                    raise
                raise NotInstallable(f"no {p.id} build runs here: "
                                     + "; ".join(f"{n}: {w}" for n, w in fallbacks)) from None
            return Outcome(request.id, tuple(plans), False, where, published.receipt, str(published.path),
                           published.replaced, published.current, published.pinned, tuple(fallbacks),
                           tuple(warnings), published.cleaned)
        raise NotInstallable(f"nothing of {request.id} to install here")
    finally:
        if src is not None:
            src.close()
