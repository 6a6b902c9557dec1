"""``superfluid.lock``: the exact engine builds of a fleet, by digest, read and written.

See docs/fleet.md, "What a lock holds".
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any
from urllib.parse import unquote, urlsplit

import tomli_w

from superfluid.installer.sources.mirror import asset_path, path_of_url, url_below
from superfluid.runtime.kernel.atomic import write_atomic
from superfluid.runtime.kernel.errors import BadFile, SuperfluidError, UsageError
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.jsonread import MAX_DEPTH, NotRegularFile, read_bytes
from superfluid.runtime.kernel.ordering import backend_rank
from superfluid.runtime.kernel.schema import validate
from superfluid.runtime.planning import Plan, PlanAsset, Sha256, install_name, parse_sha256

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "SCHEMA",
    "DEFAULT_NAME",
    "MAX_BYTES",
    "LockFileError",
    "lock_fix",
    "Target",
    "LockedFile",
    "Engine",
    "Lock",
    "locked_installs",
    "digests_of_locks",
    "dumps",
    "loads",
    "read",
    "write",
]

#: the tag we write; a reader refuses another major
SCHEMA = "superfluid-lock/1"
#: the lock's file name, in the directory a command runs in (``SUPERFLUID_LOCK`` overrides)
DEFAULT_NAME = "superfluid.lock"
#: the most bytes a lock is read of (a lock of a large fleet is under 1 MiB)
MAX_BYTES = 16 << 20

_SCHEMA_TAG = re.compile(r"superfluid-lock/(\d+)(?:\.\d+)*")
_HEADER = """\
# superfluid.lock: the exact engine builds every machine of a fleet installs, pinned by digest.
# Written by superfluid lock; superfluid lock --check says what would move and why;
# superfluid runtime install --locked installs it. Review changes to it like code.
"""
#: the advice beside ``lock --upgrade``'s fix of a lock that does not read
_ANEW = "restore it from version control"
_CONTROL = re.compile(r"[\x00-\x1f\x7f\\]")


class LockFileError(SuperfluidError):
    """A lock cannot be made or used as asked (an asset no mirror can hold, a host it has nothing for)."""

    ERROR_CODE = "lock"  # the code of its --json error since before it was named LockFileError


def lock_fix(path: str, *words: str, does: str) -> Fix:
    """``superfluid lock WORDS... [-o PATH]``, which ``does``: every fix that runs ``lock`` names the
    lock it was given for (``-o``, left out for the default ``./superfluid.lock``)."""
    where = () if path == DEFAULT_NAME else ("-o", path)
    return Fix.superfluid("lock", *words, *where, does=does)


def _anew(where: str) -> Fix:
    """The fix of a lock that does not read: ``lock --upgrade`` writes it anew at its path."""
    return lock_fix(where, "--upgrade", does="writes it anew")


@dataclass(frozen=True, slots=True, order=True)
class Target:
    """What one engine is for: a runtime on a platform, on one kind of machine (``--backend``)."""

    runtime: str
    platform: str
    host: str

    def sort_key(self) -> tuple[Any, ...]:
        return (self.runtime, self.platform, backend_rank(self.host), self.host)

    def describe(self) -> str:
        return f"{self.runtime} {self.platform} ({self.host})"


@dataclass(kw_only=True, frozen=True, slots=True)
class LockedFile:
    """One file of a release, pinned: where it sits below a mirror root, where it was found, its
    size and SHA-256, and (for an installed asset) which statements its digest was agreed against."""

    name: str
    path: str
    url: str
    size: int
    sha256: Sha256
    digest_source: str = ""
    checked: tuple[str, ...] = ()

    def to_toml(self, *, evidence: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "path": self.path, "url": self.url, "size": self.size,
                               "sha256": self.sha256}
        if not evidence:
            out.update(digest_source=self.digest_source, checked=list(self.checked))
        return out


@dataclass(kw_only=True, frozen=True, slots=True)
class Engine:
    """The install a target gets: the first plan the installer would try on such a machine."""

    target: Target
    repo: str
    version: str
    backend: str
    chosen_by: str
    abi: int | None
    tested: bool
    why: str
    assets: tuple[LockedFile, ...]
    facts: Mapping[str, Any] = field(default_factory=dict)
    evidence: tuple[LockedFile, ...] = ()
    #: who builds its assets, as it was locked (``Plan.built_by``): what an asset's Sigstore bundle must
    #: prove when it is installed from the lock; None: a lock written before superfluid recorded it
    built_by: Mapping[str, str | None] | None = None

    @property
    def install(self) -> str:
        return install_name(self.version, self.backend)

    def files(self) -> tuple[LockedFile, ...]:
        """Every file a mirror of this engine holds: its assets, then its evidence."""
        return self.assets + self.evidence

    def to_plan(self, mirror_root: str | None = None) -> Plan:
        """The plan an install of this engine carries out: digests fixed, URLs the lock's (or, with
        ``mirror_root``, the same paths below that mirror)."""
        assets = tuple(
            PlanAsset(name=a.name, url=url_below(mirror_root, a.path) if mirror_root else a.url, sha256=a.sha256,
                      size=a.size, digest_source=a.digest_source, checked=a.checked)
            for a in self.assets)
        return Plan(id=self.target.runtime, version=self.version, backend=self.backend, assets=assets,
                    tested=self.tested, chosen_by=self.chosen_by, abi=self.abi, why=self.why,
                    platform=self.target.platform, facts=dict(self.facts),
                    built_by=dict(self.built_by) if self.built_by is not None else None)

    @classmethod
    def from_plan(cls, target: Target, repo: str, plan: Plan,
                  evidence: Sequence[tuple[str, int, str]] = ()) -> Engine:
        """The engine of ``plan`` (its digests settled), with ``evidence``: ``(url, size, sha256)``
        of each small file of its release the choice read.

        Raises:
            LockFileError: an asset without a digest or a size, or at a URL no mirror layout places.
        """
        assets = []
        for a in plan.assets:
            if a.sha256 is None or a.size is None:
                missing = "SHA-256" if a.sha256 is None else "size"
                raise LockFileError(f"{target.describe()}: {a.name} has no {missing} to lock",
                                advice="a lock pins every byte; lock releases whose listing states it")
            assets.append(LockedFile(name=a.name, path=_path_for(a.url, repo, target), url=a.url, size=a.size,
                                     sha256=a.sha256,
                                     digest_source=a.digest_source, checked=tuple(a.checked)))
        files = sorted({url: (size, sha) for url, size, sha in evidence}.items(),
                       key=lambda kv: kv[0].rsplit("/", 1)[-1])
        proofs = tuple(LockedFile(name=unquote(url.rsplit("/", 1)[-1]), path=_path_for(url, repo, target), url=url,
                                  size=size,
                                  sha256=Sha256(sha)) for url, (size, sha) in files)
        facts = {k: v for k, v in plan.facts.items() if isinstance(v, (str, int, float, bool))}
        return cls(target=target, repo=repo, version=plan.version, backend=plan.backend, chosen_by=plan.chosen_by,
                   abi=plan.abi, tested=plan.tested, why=plan.why,
                   assets=tuple(assets), facts=facts, evidence=proofs,
                   built_by=dict(plan.built_by) if plan.built_by is not None else None)

    def to_toml(self) -> dict[str, Any]:
        out: dict[str, Any] = {"runtime": self.target.runtime, "platform": self.target.platform,
                               "host": self.target.host, "repo": self.repo, "version": self.version,
                               "backend": self.backend, "chosen_by": self.chosen_by}
        if self.abi is not None:  # TOML has no null: absent means none stated
            out["abi"] = self.abi
        out.update(tested=self.tested, why=self.why)
        if self.built_by is not None:  # TOML has no null: a workflow or ref not asked is absent
            out["built_by"] = {k: v for k, v in self.built_by.items() if v is not None}
        if self.facts:
            out["facts"] = dict(sorted(self.facts.items()))
        out["asset"] = [a.to_toml() for a in self.assets]
        if self.evidence:
            out["evidence"] = [e.to_toml(evidence=True) for e in self.evidence]
        return out


@dataclass(frozen=True, slots=True)
class Lock:
    """A whole lock: who wrote it, what was asked, and the engine of each target, sorted."""

    superfluid: str
    runtimes: tuple[str, ...]
    platforms: tuple[str, ...]
    backends: tuple[str, ...]
    engines: tuple[Engine, ...] = ()
    #: ``"required"``: every asset installed from the lock must be proven by its Sigstore bundle (an asset
    #: without one is refused, as ``--require-provenance`` refuses it); None: proven when it has one
    provenance: str | None = None

    def __post_init__(self) -> None:  # one order for equal locks, whatever order they were given in
        object.__setattr__(self, "runtimes", tuple(sorted(set(self.runtimes))))
        object.__setattr__(self, "platforms", tuple(sorted(set(self.platforms))))
        object.__setattr__(self, "backends", tuple(sorted(set(self.backends), key=lambda b: (backend_rank(b), b))))
        object.__setattr__(self, "engines", tuple(sorted(self.engines, key=lambda e: e.target.sort_key())))

    def engine(self, target: Target) -> Engine | None:
        return next((e for e in self.engines if e.target == target), None)

    def to_toml(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": SCHEMA, "superfluid": self.superfluid,
            "targets": {"runtimes": list(self.runtimes), "platforms": list(self.platforms),
                        "backends": list(self.backends)},
        }
        if self.provenance is not None:
            out["provenance"] = self.provenance
        if self.engines:
            out["engine"] = [e.to_toml() for e in self.engines]
        return out


# -- mirror paths -------------------------------------------------------------------------------------


def _path_for(url: str, repo: str, target: Target) -> str:
    placed = path_of_url(url)
    if placed is None or placed[0].lower() != repo.lower():
        raise LockFileError(f"{target.describe()}: {url} is not a download of a {repo} release, so no mirror "
                        "layout places it", advice="lock from GitHub or from a mirror (--mirror URL|DIR)")
    path = asset_path(repo, placed[1], placed[2])
    _check_path(path, repo, placed[2], "")
    return path


# -- writing ------------------------------------------------------------------------------------------


def dumps(lock: Lock) -> str:
    """The lock as TOML (a comment header, then ``tomli-w``'s rendering: stable for equal locks)."""

    return _HEADER + tomli_w.dumps(lock.to_toml())


def write(path: str | os.PathLike[str], lock: Lock) -> str:
    """Write ``lock`` to ``path`` atomically (a temp file beside it, then ``os.replace``); answers
    the SHA-256 of the bytes written.

    Raises:
        OSError: the directory is not writable (the temp file is removed).
    """

    data = dumps(lock).encode("utf-8")
    write_atomic(path, data, durable=True)
    return hashlib.sha256(data).hexdigest()


# -- reading ------------------------------------------------------------------------------------------


def read(path: str | os.PathLike[str]) -> tuple[Lock, str]:
    """Read and check the lock at ``path``; answers it and the SHA-256 of its bytes.

    The path goes through the gate every file we read goes through (``jsonread.read_bytes``: a
    regular file, at most ``MAX_BYTES``), the text through a nesting cap before the TOML parser.

    Raises:
        UsageError: the path names a directory, a FIFO, a device or a socket (exit 2).
        BadFile: missing, unreadable, too large, not TOML (with its line), nested deeper than any
            lock, or not a valid lock (with its key).
    """
    where = os.fspath(path)
    try:  # a link to a lock is followed (a repository may keep it elsewhere); a FIFO cannot hold the open
        data = read_bytes(where, max_bytes=MAX_BYTES, follow=True)
    except FileNotFoundError:
        raise BadFile(where, "does not exist", fix=lock_fix(where, does="writes one")) from None
    except NotRegularFile as e:
        if e.errno == errno.EFBIG:
            raise BadFile(where, f"is larger than {MAX_BYTES} bytes, more than any lock") from None
        raise UsageError(f"{where} {e.strerror}: a lock is the TOML file that superfluid's lock command writes",
                         advice="name the lock file itself (superfluid.lock)") from None
    except OSError as e:
        raise BadFile(where, f"cannot be read ({e.strerror or e})") from None
    return loads(data, where), hashlib.sha256(data).hexdigest()


def loads(data: bytes | str, where: str) -> Lock:
    """The lock in ``data`` (read from ``where``).

    Raises:
        BadFile: not UTF-8 TOML (names the line), a schema tag of another major, a schema
            violation, or a fault only code can see (names the key).
    """
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        if (depth := toml_depth(text)) > MAX_DEPTH:  # the TOML reader recurses per level: it never sees it
            raise BadFile(where, f"nests arrays or tables {depth} deep, deeper than any lock ({MAX_DEPTH})",
                          advice=_ANEW, fix=_anew(where))
        doc = tomllib.loads(text)
    except UnicodeDecodeError as e:
        raise BadFile(where, f"is not UTF-8 text (byte {e.start})", advice=_ANEW, fix=_anew(where)) from None
    except tomllib.TOMLDecodeError as e:
        raise BadFile(where, f"is not valid TOML: {e}", advice=_ANEW, fix=_anew(where)) from None
    _check_tag(doc, where)

    try:
        validate(doc, "lock", where)
    except BadFile as e:  # name the TOML key (engine[0].asset[1].sha256), not a JSON path
        key = (e.json_path or "$").removeprefix("$").removeprefix(".") or "the top level"
        raise BadFile(where, e.fault, json_path=key, advice=_ANEW, fix=_anew(where)) from None
    return _parse(doc, where)


#: what ``toml_depth`` leaves out: strings of the four kinds, and comments (a ``[`` in either nests nothing)
_TOML_SKIPPED = re.compile(r'"""(?:[^\\]|\\.)*?"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*',
                           re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def toml_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in the TOML ``text``, strings and comments left out,
    counted without recursion (a table header ``[[engine]]`` counts 2)."""
    brackets = _NOT_BRACKET.sub("", _TOML_SKIPPED.sub("", text))
    return max(accumulate(1 if c in "[{" else -1 for c in brackets), default=0)


def _check_tag(doc: Mapping[str, Any], where: str) -> None:
    tag = doc.get("schema")
    m = _SCHEMA_TAG.fullmatch(tag) if isinstance(tag, str) else None
    if m is None:
        raise BadFile(where, f"has the schema tag {tag!r}; expected {SCHEMA!r}", json_path="schema", advice=_ANEW,
                      fix=_anew(where))
    if m.group(1) != "1":
        raise BadFile(where, f"is {tag}, a version of the lock format this superfluid does not read "
                      f"(it reads {SCHEMA})", json_path="schema",
                      advice="upgrade superfluid to read it", fix=_anew(where))


def _fault(where: str, key: str, fault: str) -> BadFile:
    return BadFile(where, fault, json_path=key, advice=_ANEW, fix=_anew(where))


def _check_path(path: str, repo: str, name: str, where: str, key: str = "path") -> None:
    """A mirror path must be ``<owner>/<repo>/releases/download/<tag>/<name>``: relative, without
    ``.``/``..`` or empty parts, backslashes or control characters, so that it stays below any
    mirror root it is joined to."""
    parts = path.split("/")
    if path.startswith("/") or _CONTROL.search(path) or any(p in ("", ".", "..") for p in parts):
        raise _fault(where, key, f"{path!r} escapes the mirror (a path is relative, without '.', '..' or "
                     "empty parts, backslashes or control characters)")
    want = f"{repo}/releases/download/<tag>/{name}"
    if len(parts) != 6 or "/".join(parts[:2]) != repo or parts[2:4] != ["releases", "download"] or parts[5] != name:
        raise _fault(where, key, f"{path!r} is not {want}")


def _check_url(url: str, where: str, key: str) -> None:
    try:
        parts = urlsplit(url)
        userinfo = parts.username is not None or parts.password is not None or "@" in parts.netloc
    except ValueError:
        raise _fault(where, key, "is not a URL") from None
    if parts.scheme not in ("https", "http", "file", "oci"):
        raise _fault(where, key, f"has the scheme {parts.scheme!r}; a lock names https://, http://, file:// or "
                     "oci:// URLs")
    if userinfo:  # never repeat the URL: it holds a secret
        raise _fault(where, key, "is a URL with credentials (user:password@), which a lock never holds: it is "
                     "shared with every machine that reads it")


def _file(raw: Mapping[str, Any], repo: str, where: str, key: str, *, evidence: bool) -> LockedFile:
    _check_url(raw["url"], where, f"{key}.url")
    _check_path(raw["path"], repo, raw["name"], where, f"{key}.path")
    sha = parse_sha256(raw["sha256"])
    assert sha is not None  # the schema's pattern
    return LockedFile(name=raw["name"], path=raw["path"], url=raw["url"], size=raw["size"], sha256=sha,
                      digest_source="" if evidence else raw["digest_source"], checked=tuple(raw.get("checked", ())))


def _parse(doc: Mapping[str, Any], where: str) -> Lock:
    engines: list[Engine] = []
    seen: dict[Target, str] = {}
    digests: dict[str, tuple[str, str]] = {}
    for i, raw in enumerate(doc.get("engine", [])):
        key = f"engine[{i}]"
        target = Target(raw["runtime"], raw["platform"], raw["host"])
        if target in seen:
            raise _fault(where, key, f"is a second engine for {target.describe()} (the first is {seen[target]})")
        seen[target] = key
        files: dict[str, list[LockedFile]] = {"asset": [], "evidence": []}
        for kind, out in files.items():
            for j, f in enumerate(raw.get(kind, [])):
                locked = _file(f, raw["repo"], where, f"{key}.{kind}[{j}]", evidence=kind == "evidence")
                earlier = digests.setdefault(locked.path, (locked.sha256, f"{key}.{kind}[{j}]"))
                if earlier[0] != locked.sha256:
                    raise _fault(where, f"{key}.{kind}[{j}].sha256", f"pins {locked.path} as {locked.sha256}, and "
                                 f"{earlier[1]} pins it as {earlier[0]}")
                out.append(locked)
        engines.append(Engine(target=target, repo=raw["repo"], version=raw["version"], backend=raw["backend"],
                              chosen_by=raw["chosen_by"], abi=raw.get("abi"),
                              tested=raw["tested"], why=raw["why"], assets=tuple(files["asset"]),
                              facts=dict(raw.get("facts", {})),
                              evidence=tuple(files["evidence"]), built_by=_built_by(raw.get("built_by"))))
    targets = doc["targets"]
    return Lock(doc["superfluid"], tuple(targets["runtimes"]), tuple(targets["platforms"]),
                tuple(targets["backends"]), tuple(engines), provenance=doc.get("provenance"))


def _built_by(raw: Mapping[str, Any] | None) -> dict[str, str | None] | None:
    """An engine's ``built_by`` table as a plan states it (a key not written is None: any)."""
    if raw is None:
        return None
    return {"repository": raw["repository"], "workflow": raw.get("workflow"), "ref": raw.get("ref")}


def locked_installs(runtime_id: str, locks: Collection[str]) -> dict[str, str]:
    """Install name -> the first of ``locks`` (lock files) that names it for ``runtime_id``.

    Raises:
        BadFile: a lock that does not read.
    """
    out: dict[str, str] = {}
    for path in locks:
        lock, _ = read(path)
        for engine in lock.engines:
            if engine.target.runtime == runtime_id:
                out.setdefault(engine.install, path)
    return out


def digests_of_locks(paths: Iterable[str]) -> dict[str, set[str]]:
    """Lock file -> every digest it names (its engines' assets and evidence).

    Raises:
        BadFile: a lock that does not read.
    """
    out: dict[str, set[str]] = {}
    for path in paths:
        lock, _ = read(path)
        out[path] = {f.sha256 for e in lock.engines for f in e.files()}
    return out
