"""What a build needs of a host, as data (recorded or measured), and the pure verdict on a host.

See docs/install.md, "What a build needs".
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from superfluid.runtime.hostfacts.elf import ELFInvalid, is_elf, read, remembered
from superfluid.runtime.hostfacts.host import Host
from superfluid.runtime.hostfacts.libraries import newest, version_key
from superfluid.runtime.kernel.fixes import Fix

__all__ = ["Needs", "InvalidNeeds", "NeedsVerdict", "GLIBC_LIBRARIES", "NEEDS_SUFFIX", "measure", "measure_files",
           "judge",
           "lists_builds", "is_shared_object", "tree_files"]

#: the libraries glibc itself provides: judged by its version, never looked for one by one
GLIBC_LIBRARIES = frozenset({"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1",
                             "libresolv.so.2", "libutil.so.1", "libmvec.so.1", "ld-linux-x86-64.so.2",
                             "ld-linux-aarch64.so.1", "ld-linux.so.2", "ld-linux-armhf.so.3"})
#: the symbol version prefixes a build's needs name, by the field that holds each
_PREFIXES = (("glibc", "GLIBC_"), ("glibcxx", "GLIBCXX_"), ("cxxabi", "CXXABI_"))
_NEWER = "this build was made for a newer distribution"
#: a release's statement of what one of its archives needs: ``<archive>.needs.json`` beside it
NEEDS_SUFFIX = ".needs.json"


class InvalidNeeds(ValueError):
    """A needs document that is not one (the message names the field)."""


@dataclass(kw_only=True, frozen=True, slots=True)
class Needs:
    """What a build needs of a host. ``files`` says which file needs each version (``"glibc":
    "libllama.so"``) and each library: measured needs name them, recorded needs may not."""

    glibc: str | None = None  # "2.34": the newest GLIBC_ version any of its objects needs
    glibcxx: str | None = None  # "3.4.30"
    cxxabi: str | None = None  # "1.3.13"
    libraries: tuple[str, ...] = ()  # needed and not carried, sorted
    cpu: tuple[str, ...] = ()  # CPU features (X86_FEATURES, ARM64_HWCAPS), when stated
    files: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def libc(self) -> str | None:
        """``"glibc"`` when any object needs glibc (a ``GLIBC_`` version or one of its libraries), else None."""
        return "glibc" if self.glibc or any(n in GLIBC_LIBRARIES for n in self.libraries) else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"glibc": self.glibc, "glibcxx": self.glibcxx, "cxxabi": self.cxxabi,
                               "libraries": list(self.libraries)}
        if self.cpu:
            out["cpu"] = list(self.cpu)
        if self.files:
            out["files"] = dict(self.files)
        return out

    @classmethod
    def from_json(cls, doc: Any) -> Needs:
        """Needs from their JSON (``to_json``'s; absent keys need nothing).

        Raises:
            InvalidNeeds: not an object, a version that is not dotted numbers, a list that is not
                of names.
        """
        if not isinstance(doc, Mapping):
            raise InvalidNeeds(f"needs must be an object (it is {type(doc).__name__})")
        versions: dict[str, str | None] = {}
        for key, _ in _PREFIXES:
            value = doc.get(key)
            if value is not None and (not isinstance(value, str) or version_key(value) is None):
                raise InvalidNeeds(f"needs.{key} must be a version of dotted numbers or null (it is {value!r})")
            versions[key] = value
        lists: dict[str, tuple[str, ...]] = {}
        for key in ("libraries", "cpu"):
            value = doc.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) and v and "/" not in v for v in value):
                raise InvalidNeeds(f"needs.{key} must be a list of names (it is {value!r})")
            lists[key] = tuple(sorted(set(value)))
        files = doc.get("files", {})
        if not isinstance(files, Mapping) or not all(isinstance(v, str) for v in files.values()):
            raise InvalidNeeds("needs.files must be an object of file names")
        return cls(glibc=versions["glibc"], glibcxx=versions["glibcxx"], cxxabi=versions["cxxabi"],
                   libraries=lists["libraries"], cpu=lists["cpu"],
                   files={str(k): v for k, v in files.items()})


def is_shared_object(name: str) -> bool:
    """A shared object's name: ``*.so`` or ``*.so.<version>`` (an archive's programs are not loaded)."""
    return name.endswith(".so") or ".so." in name


def tree_files(folder: str | os.PathLike[str]) -> Iterator[os.DirEntry[str]]:
    """Every entry below ``folder`` that ``os.walk`` lists as a name (files, links to files, links
    that lead nowhere), in its order: a folder's names sorted, then its subfolders in sorted order;
    a link to a folder is neither listed nor followed. Read with ``scandir``, whose entries tell a
    link from a file without a ``stat`` (the check before an install's probe walks every staged file)."""
    pending = [os.fspath(folder)]
    while pending:
        with os.scandir(pending.pop()) as found:
            entries = sorted(found, key=lambda e: e.name)
        pending.extend(reversed([e.path for e in entries if e.is_dir() and not e.is_symlink()]))
        yield from (e for e in entries if not e.is_dir())


def _objects(folder: Path) -> tuple[list[Path], set[str]]:
    """The shared objects under ``folder`` (regular files, links not followed) and every name the
    folder carries (files, links and sonames: what ``$ORIGIN`` finds)."""
    objects, carried = [], set()
    for e in tree_files(folder):
        carried.add(e.name)
        if is_shared_object(e.name) and not e.is_symlink() and (remembered(e.path) is not None or is_elf(e.path)):
            objects.append(Path(e.path))
    return objects, carried


def measure(folder: str | os.PathLike[str]) -> Needs:
    """The needs of the shared objects under ``folder`` (an extracted build): for each version
    prefix the newest any object needs and which one, and the libraries they name that the folder
    does not carry.

    Raises:
        ELFInvalid: a shared object that is not an ELF file the loader could read (the message
            names it).
    """
    objects, carried = _objects(Path(folder))
    return _measured(objects, carried)


def measure_files(paths: Iterable[str | os.PathLike[str]]) -> Needs:
    """The needs of the shared objects among ``paths``, shipped together (each carries the others).

    Raises:
        ELFInvalid: as ``measure``.
    """
    files = [Path(p) for p in paths]
    return _measured([p for p in files if is_shared_object(p.name) and is_elf(p.resolve())], {p.name for p in files})


def _measured(objects: list[Path], carried: set[str]) -> Needs:
    best: dict[str, tuple[tuple[int, ...], str, str]] = {}
    wanted: dict[str, str] = {}
    for path in objects:
        try:
            obj = read(path)
        except ELFInvalid as e:
            raise ELFInvalid(f"{path.name}: {e}") from None
        if obj.soname:
            carried.add(obj.soname)
        versions = [n.name for n in obj.version_needs]
        for key, prefix in _PREFIXES:
            text = newest(versions, prefix)
            key_of = version_key(text) if text else None
            if text and key_of is not None and (key not in best or key_of > best[key][0]):
                best[key] = (key_of, text, path.name)
        for lib in obj.needed:
            wanted.setdefault(lib, path.name)
    missing = sorted(n for n in wanted if n not in carried)
    files = {key: name for key, (_, _, name) in best.items()} | {lib: wanted[lib] for lib in missing}
    newest_of = {k: best[k][1] if k in best else None for k, _ in _PREFIXES}
    return Needs(glibc=newest_of["glibc"], glibcxx=newest_of["glibcxx"], cxxabi=newest_of["cxxabi"],
                 libraries=tuple(missing), cpu=(), files=files)


@dataclass(frozen=True, slots=True)
class NeedsVerdict:
    """Whether a build's needs are met here; ``reasons`` say why not, one per unmet need."""

    reasons: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.reasons

    def __str__(self) -> str:
        return "; ".join(self.reasons)


def _older(need: str | None, have: str | None) -> bool:
    n, h = version_key(need or ""), version_key(have or "")
    return n is not None and h is not None and n > h


def _stated_libraries(host: Host) -> set[str]:
    """The libraries a host's device facts speak for: a Vulkan driver's loader, the NVIDIA driver's
    ``libcuda.so.1``, a CUDA runtime's own libraries."""
    out = {"libvulkan.so.1"} if host.vulkan else set()
    if host.nvidia_driver:
        out.add("libcuda.so.1")
    if host.cuda_runtime:
        out |= {f"{n}.so.{host.cuda_runtime}" for n in ("libcudart", "libcublas", "libcublasLt")}
    return out


def _who(needs: Needs, key: str, build: str) -> str:
    return needs.files.get(key) or build


def judge(needs: Needs, host: Host, *, build: str = "this build") -> NeedsVerdict:
    """Whether ``host`` meets ``needs``: the rule the dynamic loader applies, stated before it runs.

    A glibc build does not load with musl (said alone: nothing else of it matters). A ``GLIBC_``,
    ``GLIBCXX_`` or ``CXXABI_`` version newer than the host's glibc, or than its ``libstdc++.so.6``
    defines, is refused ("made for a newer distribution"). A library the build names and does not
    carry must be on the loader's paths (glibc's own libraries excepted: its version speaks for
    them; and those the host's device facts speak for, ``_stated_libraries``). A CPU feature
    stated must be the CPU's. A fact the host does not know (None, no libraries probed, no CPU
    features read) refuses nothing. ``build`` names the subject when ``needs`` do not name the file.
    """
    if needs.libc == "glibc" and host.libc == "musl":  # nothing else of it matters
        version = f" (GLIBC_{needs.glibc})" if needs.glibc else ""
        return NeedsVerdict((f"{_who(needs, 'glibc', build)} needs glibc{version}; this host's C library is musl: "
                        "this build is made for glibc distributions",))
    reasons = []
    if _older(needs.glibc, host.glibc):
        reasons.append(f"{_who(needs, 'glibc', build)} needs GLIBC_{needs.glibc}; this host has glibc "
                       f"{host.glibc}: {_NEWER}")
    for key, prefix, have in (("glibcxx", "GLIBCXX_", host.glibcxx), ("cxxabi", "CXXABI_", host.cxxabi)):
        need = getattr(needs, key)
        if _older(need, have):
            reasons.append(f"{_who(needs, key, build)} needs {prefix}{need}; this host's libstdc++ defines "
                           f"{prefix}{have} at most: {_NEWER}")
    if host.libraries:
        stated = _stated_libraries(host)
        absent = [n for n in needs.libraries if n not in host.libraries and n not in stated
                  and not (n in GLIBC_LIBRARIES and host.libc == "glibc")]
        for name in absent:
            reasons.append(f"{_who(needs, name, build)} needs {name}, which is on none of this host's library "
                           "paths")
    if host.cpu_features:
        lacking = [f for f in needs.cpu if f not in host.cpu_features]
        if lacking:
            reasons.append(f"{build} needs the CPU features {', '.join(lacking)}; this CPU has "
                           f"{', '.join(host.cpu_features)}")
    return NeedsVerdict(tuple(reasons))


def lists_builds(runtime_id: str) -> Fix:
    """The fix of a build whose needs this host does not meet: where to look for the builds that
    install here."""
    return Fix.superfluid("runtime", "versions", runtime_id, does="lists the builds that install here")
