"""``superfluid doctor [--json]``: this machine as the installer sees it, and what installs here.

See docs/cli.md and docs/install.md, "What a build needs".
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Mapping
from typing import Any

from superfluid import __version__
from superfluid.doctor_problems import (
    Problem,
    cache_problem,
    current_problem,
    device_problems,
    exchange_problem,
    home_problem,
    install_problems,
    trust_problems,
)
from superfluid.installer.home.exchange import exchanges_in
from superfluid.installer.home.installs import Installed, Verdict, current_install, judge_all
from superfluid.installer.sources.oci.auth import auth_files
from superfluid.installer.trust.manifest import trust_top
from superfluid.installer.unpack.inflate import INFLATER
from superfluid.lock_flags import lock_path
from superfluid.parser import Help, Parser, add_json, exits
from superfluid.runtime import registry
from superfluid.runtime.hostfacts.host import NOTABLE, Host, detect
from superfluid.runtime.hostfacts.system import host_platform
from superfluid.runtime.kernel.layout import cache_dir, home, keys_dir, runtime_dir
from superfluid.runtime.kernel.ordering import backend_family
from superfluid.runtime.kernel.output import print_json
from superfluid.runtime.kernel.receipt import provenance_of
from superfluid.runtime.planning import NotInstallable, Request, backend_runs_here, first_published

__all__ = ["HELP", "FAMILIES", "arguments", "run", "findings", "report_text"]

HELP = Help(
    "this machine as the installer sees it, what installs here, and what is wrong",
    "The host's facts (platform, distribution, kernel, Python, C library, libstdc++'s newest GLIBCXX_ and "
    "CXXABI_, CPU features and x86-64 level, drivers, the library directories and the Vulkan loader, libcuda "
    "and CUDA runtime found in them; each a SUPERFLUID_HOST_* variable set is marked), superfluid's paths "
    "(home, cache, keys, trust roots, lock, registry login) and what set them, and for each runtime its "
    "installs with their verdicts, the one current names, the plan its install would take here and why each "
    "other candidate would not. Last, each problem found, with what fixes it: an install broken, changed or "
    "made for another host, a current that names no install, a GPU build no device here runs, a cache "
    "holding what a prune removes, a kept TUF root that expires within 30 days, a home that cannot be "
    "written or whose filesystem replaces an install in two steps. From the recipes and the home alone: no "
    "network, nothing changed. Paste it into a bug report.",
    ("superfluid doctor", "superfluid doctor --json", "superfluid doctor --json | jq -r '.problems[].fix // empty'"),
    exits(_0="answered: no problem found", _1="answered: it found a problem (each listed last, with its fix)"),
)

#: each install of a runtime with its verdict (``installs.judge_all``)
Judged = list[tuple[Installed, Verdict]]
#: the backend families a runtime's candidates are named by when no plan of them is made
FAMILIES = ("metal", "cuda", "rocm", "vulkan", "cpu")


def arguments(p: Parser) -> None:
    add_json(p)


def _runtime(runtime_id: str, host: Host) -> dict[str, Any]:
    """What ``runtime install <id>`` would take here, its fallbacks, and why each other candidate
    would not install: a plan refused by what its build needs, and each backend family no plan is
    made of (``planning.backend_runs_here``)."""
    adapter = registry.get(runtime_id)
    refused: list[dict[str, Any]] = []
    try:
        plans = adapter.plan(Request(id=runtime_id), host)
    except NotInstallable as e:
        return {"id": runtime_id, "installs": None, "why_not": e.message, "fallbacks": [], "refused": refused}
    chosen = first_published(plans)
    fallbacks = [p.install for p in plans if p is not chosen and p.refused is None]
    refused += [{"install": p.install, "backend": p.backend, "why": p.refused} for p in plans if p.refused]
    planned = {backend_family(p.backend) for p in plans}
    for family in FAMILIES:
        if family not in planned:
            why = backend_runs_here(family, host.platform, host) or \
                f"no {family} build of {runtime_id} is planned for {host.platform}"
            refused.append({"install": None, "backend": family, "why": why})
    why_not = None if chosen is not None else "each of its plans is refused here (below)"
    return {"id": runtime_id, "installs": chosen.to_json() if chosen is not None else None, "why_not": why_not,
            "fallbacks": fallbacks, "refused": refused}


def _refusal(message: str, runtime_id: str) -> str:
    """Why nothing of ``runtime_id`` installs here, said once: its refusal, led by "nothing installs
    here" unless its words already say so (mlx's do)."""
    said = f"nothing of {runtime_id} installs here" in message or "nothing installs here" in message
    return message if said else f"nothing installs here: {message}"


def findings(environ: Mapping[str, str]) -> tuple[dict[str, Any], list[Problem]]:
    """The doctor's answer (schema ``doctor``) without its ``problems``, and the problems found."""
    host = detect(environ)
    where = home(environ)
    judged = {runtime_id: _judged(runtime_id, where, environ) for runtime_id in registry.IDS}
    doc = {"superfluid": __version__, "describe": host.describe(), "python": _python(), "paths": _paths(environ),
           "host": host.to_json(), "inflater": INFLATER,
           "runtimes": [{**_runtime(runtime_id, host), **_installed(runtime_id, where, judged[runtime_id])}
                        for runtime_id in registry.IDS]}
    return doc, _problems(where, host, judged)


def _python() -> dict[str, str]:
    """The Python this superfluid runs on: its version and its executable."""
    return {"version": platform.python_version(), "executable": sys.executable}


def _path(path: str, set_by: str | None) -> dict[str, Any]:
    return {"path": path, "exists": os.path.lexists(path), "set_by": set_by}


def _paths(environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """superfluid's own paths: where each is, whether something is there, and the variable that set it
    (null: the default). The home, and below it the download cache, the minisign keys trusted and the
    manifest services' kept TUF roots; the lock file (``lock_flags.lock_path``) and the file a registry
    login is read from (``oci.auth.auth_files``)."""
    where = home(environ)
    by_home = "SUPERFLUID_HOME" if environ.get("SUPERFLUID_HOME") else None
    named, docker = environ.get("REGISTRY_AUTH_FILE") or "", environ.get("DOCKER_CONFIG") or ""
    login = auth_files(named=named, docker_config=docker, user_home=environ.get("HOME") or "")[0]
    return {"home": _path(where, by_home), "cache": _path(cache_dir(where), by_home),
            "keys": _path(keys_dir(where), by_home), "trust": _path(trust_top(where), by_home),
            "lock": _path(os.path.abspath(lock_path(None, environ)),
                          "SUPERFLUID_LOCK" if environ.get("SUPERFLUID_LOCK") else None),
            "registry_login": _path(str(login), "REGISTRY_AUTH_FILE" if named else "DOCKER_CONFIG" if docker else None)}


def _judged(runtime_id: str, where: str, environ: Mapping[str, str]) -> Judged:
    """Each install of the runtime in the home with its verdict (``installs.judge``: the word every
    command says of it, why, and what fixes it)."""
    root = runtime_dir(where, runtime_id)
    return judge_all(root, runtime_id, serving=current_install(root), platform=host_platform(environ))


def _installed(runtime_id: str, where: str, judged: Judged) -> dict[str, Any]:
    """``installed``: each install, its verdict's word and its provenance as ``runtime list`` shows it
    (``receipt.provenance_of``); ``current``: the install ``current`` names."""
    return {"installed": [{"install": v.install, "state": v.state, "why": v.why,
                           "provenance": provenance_of(i.receipt.extra) if i.receipt is not None else None}
                          for i, v in judged],
            "current": current_install(runtime_dir(where, runtime_id))}


def _provenance_words(summary: Mapping[str, Any] | None) -> str:
    """An install's provenance (``receipt.provenance_of``) for people: who built it, as proven, or that
    nothing was proven (or recorded: a receipt written before superfluid looked for bundles, a ``--from``
    file, one that does not read)."""
    if summary is None:
        return "no provenance recorded"
    if summary.get("repository") is None:
        return "no provenance"
    built = f"built by {summary['repository']} {summary['workflow']} at {summary['ref']}"
    return built if summary.get("proven") else f"{built} (not every archive proven)"


def _problems(where: str, host: Host, judged: Mapping[str, Judged]) -> list[Problem]:
    """Everything wrong, in the order a reader fixes it: the home, each runtime's installs, its
    ``current`` and its GPU builds, the filesystem of the folders that hold installs, the cache, the
    kept trust roots."""
    home_fault = home_problem(where)
    found = [home_fault] if home_fault is not None else []
    for runtime_id, installs in judged.items():
        root = runtime_dir(where, runtime_id)
        found += install_problems(runtime_id, installs)
        found += [p for p in (current_problem(runtime_id, root, installs),) if p is not None]
        found += device_problems(runtime_id, installs, host)
    if home_fault is None:
        folders = {runtime_dir(where, r): exchanges_in(runtime_dir(where, r)) for r, i in judged.items() if i}
        found += [p for p in (exchange_problem(folders), cache_problem(where)) if p is not None]
    return found + trust_problems(where)


def _or(value: object, none: str = "not known") -> str:
    return none if value is None or value == "" else str(value)


def _cuda_runtime(h: dict[str, Any]) -> str:
    """The CUDA runtime as the facts say it (issue 42, item 13: the words of the JSON's facts): its
    major, version, the ``libcudart`` found and whether the loader reaches it; one found without
    its cuBLAS beside it is named, and said not to count."""
    path, version, reachable = (h.get(k) for k in ("cuda_runtime_path", "cuda_runtime_version",
                                                   "cuda_runtime_reachable"))
    words = [f"version {version}"] if version else []
    words += [path] if path else []
    words += [] if reachable is None else ["on the loader's paths" if reachable else "on none of the loader's paths"]
    if h["cuda_runtime"]:
        return f"{h['cuda_runtime']}" + (f" ({', '.join(words)})" if words else "")
    if path:
        major = path.rsplit(".so.", 1)[-1]
        return f"none usable: {', '.join(words)}, without libcublas.so.{major} beside it"
    return "none"


def _gpu_rows(h: dict[str, Any]) -> list[tuple[str, str, tuple[str, ...]]]:
    """The GPU facts (issue 32): the NVIDIA driver and each GPU's capability, the CUDA runtime, ROCm
    (its version and gfx targets), Vulkan (its ICD files); each with the facts it says."""
    names = h.get("gpu_names") or []
    caps = [f"{names[i]} sm_{c.replace('.', '')}" if i < len(names) and names[i] else f"sm_{c.replace('.', '')}"
            for i, c in enumerate(h.get("cuda_capabilities") or [])]
    rocm = f"yes, version {_or(h.get('rocm_version'))}" if h["rocm"] else "no"
    return [("NVIDIA driver", _or(h["nvidia_driver"], "none"), ("nvidia_driver",)),
            ("CUDA GPUs", ", ".join(caps) or "not known", ("cuda_capabilities", "gpu_names")),
            ("CUDA runtime", _cuda_runtime(h), ("cuda_runtime", "cuda_runtime_version", "cuda_runtime_reachable",
                                                "cuda_runtime_path")),
            ("ROCm", rocm, ("rocm", "rocm_version")),
            ("ROCm GPUs", ", ".join(h.get("rocm_gfx") or []) or "not known", ("rocm_gfx",)),
            ("Vulkan", "yes" if h["vulkan"] else "no", ("vulkan",)),
            ("Vulkan ICDs", ", ".join(h.get("vulkan_icds") or []) or "none", ("vulkan_icds",))]


def _distribution(h: dict[str, Any]) -> str:
    """The distribution as ``/etc/os-release`` names it: its pretty name, else its id and version."""
    d = h.get("distribution")
    if not isinstance(d, dict):
        return "not known"
    return str(d.get("pretty_name") or " ".join(str(d[k]) for k in ("id", "version_id") if d.get(k)) or "not known")


def _cpu(h: dict[str, Any]) -> str:
    """The CPU features, the x86-64 level (v1 to v4) they make beside them."""
    features = " ".join(h["cpu_features"]) or "not known"
    level = h.get("x86_64_level")
    return f"{features} (x86-64-{level})" if level else features


def _fact_rows(doc: dict[str, Any]) -> list[tuple[str, str, tuple[str, ...]]]:
    """The host's facts for people, each row with the facts (keys of ``host``) it says."""
    h = doc["host"]
    libc = {"glibc": f"glibc {_or(h['glibc'])}", "musl": "musl"}.get(h["libc"] or "", "not known")
    cxx = ", ".join(f"{p}{v}" for p, v in (("GLIBCXX_", h["glibcxx"]), ("CXXABI_", h["cxxabi"])) if v) or "not found"
    memory = f"{h['memory'] / (1 << 30):.1f} GiB" if h["memory"] else "not known"
    python = doc["python"]
    rows = [("platform", f"{h['os']}-{h['arch']} ({doc['describe']})", ("os", "arch")),
            ("distribution", _distribution(h), ("distribution",)), ("kernel", _or(h.get("kernel")), ("kernel",)),
            ("Python", f"{python['version']} ({python['executable']})", ()),
            ("C library", libc, ("libc", "glibc")), ("libstdc++", cxx, ("glibcxx", "cxxabi")),
            ("CPU features", _cpu(h), ("cpu_features", "x86_64_level")), ("memory", memory, ("memory",))]
    rows += _gpu_rows(h)
    found = h["libraries"] or {}
    rows += [(name, _or(found.get(name), "not found"), ()) for name in NOTABLE] if h["libraries"] is not None else []
    rows.append(("library dirs", ", ".join(h["library_dirs"]) or "not probed", ("library_dirs",)))
    rows.append(("inflater", doc["inflater"], ()))
    return rows


def _set_by(value: str, keys: tuple[str, ...], set_by: Mapping[str, str]) -> str:
    """``value``, marked with the ``SUPERFLUID_HOST_*`` variables that set the facts it says."""
    named = sorted({set_by[k] for k in keys if k in set_by})
    return f"{value} (set by {', '.join(named)})" if named else value


def _path_text(entry: dict[str, Any]) -> str:
    there = "exists" if entry["exists"] else "not there"
    return f"{entry['path']} ({there}; " + (f"set by {entry['set_by']})" if entry["set_by"] else "the default)")


def _aligned(rows: list[tuple[str, str]], width: int) -> list[str]:
    return [f"  {k.ljust(width)}  {v}" for k, v in rows]


def _runtime_lines(r: dict[str, Any]) -> list[str]:
    """One runtime: the plan its install takes here (or why none), its fallbacks and refusals, and
    its installs here with their verdicts (``current`` marked)."""
    out: list[str] = []
    if r["installs"] is not None:
        p = r["installs"]
        out.append(f"  {r['id']}: installs {p['install']} ({p['why']})")
        if r["fallbacks"]:
            out.append(f"    then, if it does not run: {', '.join(r['fallbacks'])}")
    else:
        out.append(f"  {r['id']}: {_refusal(r['why_not'], r['id'])}")
    for x in r["refused"]:
        out.append(f"    not {x['install'] or x['backend']}: {x['why']}")
    if r.get("installed"):
        out.append("    installed here: " + "; ".join(
            f"{i['install']} {i['state']}" + (" (current)" if i["install"] == r.get("current") else "")
            for i in r["installed"]))
        out.append("    provenance: " + "; ".join(
            f"{i['install']} {_provenance_words(i['provenance'])}" for i in r["installed"]))
    return out


def report_text(doc: dict[str, Any], problems: list[Problem]) -> str:
    """The doctor's answer for people: the facts of ``doc`` (``findings``), nothing else; last, the
    ``problems`` with what fixes each, or "no problems found"."""
    h = doc["host"]
    set_by = h.get("set_by") or {}
    facts = [(k, _set_by(v, keys, set_by)) for k, v, keys in _fact_rows(doc)]
    paths = [(k.replace("_", " "), _path_text(v)) for k, v in doc["paths"].items()]
    width = max(len(k) for k, _ in facts + paths)
    out = [f"superfluid {doc['superfluid']} doctor: this machine, as the installer sees it"]
    out += _aligned(facts, width)
    out += [f"  not known: {u['path']} is {u['why']}" for u in h.get("unread") or []]
    out.append("superfluid's paths:")
    out += _aligned(paths, width)
    out.append("runtimes (from this superfluid's recipes; nothing fetched):")
    for r in doc["runtimes"]:
        out += _runtime_lines(r)
    out += ["problems:", *(f"  {p.text()}" for p in problems)] if problems else ["no problems found"]
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    """``doctor``; 0 answered and no problem found, 1 answered with a problem (as ``brew doctor``), 2 usage."""
    doc, problems = findings(dict(os.environ))
    if getattr(args, "json", False):
        print_json({**doc, "problems": [p.to_json() for p in problems]})
    else:
        sys.stdout.write(report_text(doc, problems))
    return 1 if problems else 0
