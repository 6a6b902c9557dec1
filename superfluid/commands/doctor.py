"""``superfluid doctor [--json]``: this machine as the installer sees it, and what installs here.

See docs/cli.md and docs/install.md, "What a build needs".
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from superfluid import __version__
from superfluid.installer.home.installs import current_install, judge_all
from superfluid.installer.unpack.inflate import INFLATER
from superfluid.parser import Help, Parser, add_json, exits
from superfluid.runtime import registry
from superfluid.runtime.hostfacts.host import NOTABLE, Host, detect
from superfluid.runtime.hostfacts.system import host_platform
from superfluid.runtime.kernel.layout import home, runtime_dir
from superfluid.runtime.kernel.ordering import backend_family
from superfluid.runtime.kernel.output import print_json
from superfluid.runtime.planning import NotInstallable, Request, backend_runs_here, first_published

__all__ = ["HELP", "FAMILIES", "arguments", "run", "report", "report_text"]

HELP = Help(
    "this machine as the installer sees it, and what installs here",
    "The host's facts (platform, C library, libstdc++'s newest GLIBCXX_ and CXXABI_, CPU features, drivers, "
    "the library directories and the Vulkan loader, libcuda and CUDA runtime found in them) and, for each "
    "runtime, the plan its install would take here and why each other candidate would not. "
    "From the recipes alone: no network, nothing changed. Paste it into a bug report.",
    ("superfluid doctor", "superfluid doctor --json"),
    exits(_0="answered"),
)

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


def report(environ: dict[str, str]) -> dict[str, Any]:
    """The doctor's answer (schema ``doctor``)."""
    host = detect(environ)
    return {"superfluid": __version__, "describe": host.describe(), "host": host.to_json(), "inflater": INFLATER,
            "runtimes": [{**_runtime(runtime_id, host), "installed": _installed(runtime_id, environ)}
                         for runtime_id in registry.IDS]}


def _installed(runtime_id: str, environ: dict[str, str]) -> list[dict[str, Any]]:
    """Each install of the runtime in the home with its verdict (``installs.judge``: the word every
    command says of it, and why)."""
    root = runtime_dir(home(environ), runtime_id)
    return [{"install": v.install, "state": v.state, "why": v.why}
            for _, v in judge_all(root, runtime_id, serving=current_install(root), platform=host_platform(environ))]


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


def _gpu_rows(h: dict[str, Any]) -> list[tuple[str, str]]:
    """The GPU facts (issue 32): the NVIDIA driver and each GPU's capability, the CUDA runtime, ROCm
    (its version and gfx targets), Vulkan (its ICD files)."""
    names = h.get("gpu_names") or []
    caps = [f"{names[i]} sm_{c.replace('.', '')}" if i < len(names) and names[i] else f"sm_{c.replace('.', '')}"
            for i, c in enumerate(h.get("cuda_capabilities") or [])]
    rocm = f"yes, version {_or(h.get('rocm_version'))}" if h["rocm"] else "no"
    return [("NVIDIA driver", _or(h["nvidia_driver"], "none")), ("CUDA GPUs", ", ".join(caps) or "not known"),
            ("CUDA runtime", _cuda_runtime(h)), ("ROCm", rocm),
            ("ROCm GPUs", ", ".join(h.get("rocm_gfx") or []) or "not known"),
            ("Vulkan", "yes" if h["vulkan"] else "no"),
            ("Vulkan ICDs", ", ".join(h.get("vulkan_icds") or []) or "none")]


def report_text(doc: dict[str, Any]) -> str:
    """The doctor's answer for people: the facts of ``doc`` (the JSON answer), nothing else."""
    h = doc["host"]
    libc = {"glibc": f"glibc {_or(h['glibc'])}", "musl": "musl"}.get(h["libc"] or "", "not known")
    cxx = ", ".join(f"{p}{v}" for p, v in (("GLIBCXX_", h["glibcxx"]), ("CXXABI_", h["cxxabi"])) if v) or "not found"
    memory = f"{h['memory'] / (1 << 30):.1f} GiB" if h["memory"] else "not known"
    rows = [("platform", f"{h['os']}-{h['arch']} ({doc['describe']})"), ("C library", libc), ("libstdc++", cxx),
            ("CPU features", " ".join(h["cpu_features"]) or "not known"), ("memory", memory)]
    rows += _gpu_rows(h)
    found = h["libraries"] or {}
    rows += [(name, _or(found.get(name), "not found")) for name in NOTABLE] if h["libraries"] is not None else []
    rows.append(("library dirs", ", ".join(h["library_dirs"]) or "not probed"))
    rows.append(("inflater", doc["inflater"]))
    width = max(len(k) for k, _ in rows)
    out = [f"superfluid {doc['superfluid']} doctor: this machine, as the installer sees it"]
    out += [f"  {k.ljust(width)}  {v}" for k, v in rows]
    out.append("runtimes (from this superfluid's recipes; nothing fetched):")
    for r in doc["runtimes"]:
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
            out.append("    installed here: " + "; ".join(f"{i['install']} {i['state']}" for i in r["installed"]))
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    """``doctor``; 0 answered, 2 usage."""
    doc = report(dict(os.environ))
    if getattr(args, "json", False):
        print_json(doc)
    else:
        sys.stdout.write(report_text(doc))
    return 0
