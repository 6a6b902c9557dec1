#!/usr/bin/env python3
"""Build real libllama libraries for the tests, from sdists the package index serves.

Two layouts of ``llama_context_params`` (SPEC §4.2), each from a pinned source distribution that
vendors a llama.cpp tree (notes/llamacpp.md §2b and §7.4 measured these recipes), and the second
built once more as upstream's release workflow builds its Linux archives:

- ``v1``: ``llama-cpp-python==0.3.36`` vendors llama.cpp b11312 (160-byte context params);
- ``v2``: ``xllamacpp==2026.10.11549`` vendors llama.cpp b11549 (168 bytes, ``moe_cache_size`` at 112);
- ``dl``: the v2 tree with ``GGML_BACKEND_DL=ON`` (the CPU backend a module, ``libggml-cpu.so``, that
  libllama does not link and the loader finds at run time; one CPU variant, not upstream's
  ``GGML_CPU_ALL_VARIANTS``, for CI time).

Each sdist is fetched with the ordinary pip client by pinned version (``--no-binary <name>``, never
``:all:``, which would compile build dependencies too) and checked against a pinned sha256. Only
the ``llama`` cmake target is built (``GGML_NATIVE=OFF`` so the result is portable, RPATH
``$ORIGIN`` so the directory can be moved), then installed into
``$SUPERFLUID_NATIVE_CACHE/llamacpp/<layout>/``: ``libllama.so*`` and ``libggml*.so*`` side by side,
the build's public headers under ``include/`` (the layout test compiles ``offsetof`` against them),
and ``build.json``, the stamp. A layout is rebuilt only when its pinned inputs change (the stamp
holds them); an interrupted build leaves no stamp and is redone.

Usage: ``build_libllama.py [v1|v2|dl|all] [--json]`` prints one line per layout: ``<layout> <dir>``
(or the stamps as JSON). Exit 0 when every asked layout is built, 1 with the reason otherwise.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

# Bump when the recipe below changes in a way the pins do not show (flags, copied files).
RECIPE_REVISION = 1

CMAKE_FLAGS = (
    "-G",
    "Ninja",
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=ON",
    "-DLLAMA_BUILD_COMMON=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    # the server build would fetch a prebuilt UI from the network (notes §2b)
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_CURL=OFF",
    "-DGGML_NATIVE=OFF",
    "-DCMAKE_BUILD_RPATH=$ORIGIN",
)

# What the libllama build reads from the vendored tree (37 MB instead of ~180 MB extracted).
TREE_PARTS = ("CMakeLists.txt", "LICENSE", "licenses", "cmake", "include", "src", "ggml", "vendor")


@dataclass(frozen=True)
class Pin:
    """One pinned source distribution and the llama.cpp tree inside it."""

    layout: str
    package: str
    version: str
    sdist: str
    sha256: str
    tree: str  # the vendored llama.cpp directory inside the sdist
    build: str  # the llama.cpp build number the tree is (notes §2 and §7.3)


PINS = {
    "v1": Pin(
        layout="v1",
        package="llama-cpp-python",
        version="0.3.36",
        sdist="llama_cpp_python-0.3.36.tar.gz",
        sha256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
        tree="llama_cpp_python-0.3.36/vendor/llama.cpp",
        build="b11312",
    ),
    "v2": Pin(
        layout="v2",
        package="xllamacpp",
        version="2026.10.11549",
        sdist="xllamacpp-2026.10.11549.tar.gz",
        sha256="c17ee1163006f70726abb9f72137830818f3d8cb60bfc34cb232d08428eaa22b",
        tree="xllamacpp-2026.10.11549/thirdparty/llama.cpp",
        build="b11549",
    ),
}


#: a layout built as upstream's release workflow builds its Linux archives (issue 31, item 5): the
#: backends as modules loaded at run time (``GGML_BACKEND_DL``: libllama links no CPU backend, the
#: loader finds ``libggml-cpu.so`` beside it), one CPU module rather than upstream's
#: ``GGML_CPU_ALL_VARIANTS`` (CI time); the v2 tree
PINS["dl"] = Pin(**{**asdict(PINS["v2"]), "layout": "dl"})
#: per layout: cmake flags beyond ``CMAKE_FLAGS``, and the targets built
EXTRA_FLAGS = {"dl": ("-DGGML_BACKEND_DL=ON", "-DGGML_CPU_ALL_VARIANTS=OFF")}
TARGETS = {"dl": ("llama", "ggml-cpu")}


class BuildFailed(Exception):
    """A step of the build failed; the message says which and why."""


def cache_root() -> Path:
    """The shared native cache: ``$SUPERFLUID_NATIVE_CACHE``, else ``<checkout>/.cache/native``."""
    env = os.environ.get("SUPERFLUID_NATIVE_CACHE")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / ".cache" / "native"


def layout_dir(layout: str, root: Path | None = None) -> Path:
    """Where the built library of ``layout`` lives."""
    return (root or cache_root()) / "llamacpp" / layout


def _wanted_stamp(pin: Pin) -> dict[str, object]:
    return {"pin": asdict(pin), "cmake": [*CMAKE_FLAGS, *EXTRA_FLAGS.get(pin.layout, ())],
            "recipe_revision": RECIPE_REVISION}


def read_stamp(directory: Path) -> dict[str, object] | None:
    """The stamp of a finished build in ``directory``, or None when there is none (or it is broken)."""
    try:
        data = json.loads((directory / "build.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_current(pin: Pin, root: Path | None = None) -> bool:
    """True when the layout's directory holds a finished build of exactly these pinned inputs."""
    directory = layout_dir(pin.layout, root)
    stamp = read_stamp(directory)
    if stamp is None or stamp.get("inputs") != _wanted_stamp(pin):
        return False
    return (directory / "libllama.so").exists()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _run(cmd: list[str], log: Path, what: str) -> None:
    with log.open("ab") as out:
        out.write(("\n$ " + " ".join(cmd) + "\n").encode())
        out.flush()
        rc = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT)
    if rc != 0:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise BuildFailed(f"{what} failed (exit {rc}); the last lines of {log}:\n" + "\n".join(tail))


def fetch_sdist(pin: Pin, downloads: Path, log: Path) -> Path:
    """Download the pinned sdist with pip (by name and version only) and check its sha256.

    Raises:
        BuildFailed: pip failed, or the file's digest is not the pinned one.
    """
    target = downloads / pin.sdist
    if target.exists() and _sha256(target) == pin.sha256:
        return target
    downloads.mkdir(parents=True, exist_ok=True)
    req = downloads / f"{pin.package}.req.txt"
    req.write_text(f"{pin.package}=={pin.version} --hash=sha256:{pin.sha256}\n")
    _run(
        [
            sys.executable, "-m", "pip", "download", "-q", "--no-deps",
            "--no-binary", pin.package, "--require-hashes", "-r", str(req), "-d", str(downloads),
        ],
        log,
        f"pip download of {pin.package}=={pin.version}",
    )
    if not target.exists():
        raise BuildFailed(f"pip download of {pin.package}=={pin.version} did not write {target}")
    got = _sha256(target)
    if got != pin.sha256:
        target.unlink()
        raise BuildFailed(f"{target}: sha256 {got}, pinned {pin.sha256}")
    return target


def extract_tree(pin: Pin, sdist: Path, dest: Path, parts: tuple[str, ...] = TREE_PARTS) -> Path:
    """Extract ``parts`` of the vendored llama.cpp tree into ``dest``: by default what the libllama
    build reads (``build_llama_server.py`` asks for more)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    prefixes = tuple(f"{pin.tree}/{part}" for part in parts)
    with tarfile.open(sdist, "r:gz") as tar:
        members = []
        for m in tar.getmembers():
            if not (m.name in prefixes or m.name.startswith(tuple(p + "/" for p in prefixes))):
                continue
            m = m.replace(name=m.name[len(pin.tree) + 1 :])
            members.append(m)
        tar.extractall(dest, members=members, filter="data")
    return dest


def install_outputs(bin_dir: Path, src: Path, dest: Path) -> None:
    """Copy the shared libraries (with their symlinks) and the public headers into ``dest``."""
    for item in sorted(bin_dir.iterdir()):
        if item.name.startswith(("libllama.so", "libggml")) and ".so" in item.name:
            target = dest / item.name
            if item.is_symlink():
                target.symlink_to(os.readlink(item))
            else:
                shutil.copy2(item, target)
    inc = dest / "include"
    shutil.copytree(src / "include", inc)
    shutil.copytree(src / "ggml" / "include", inc, dirs_exist_ok=True)


def build(layout: str, *, root: Path | None = None, force: bool = False) -> Path:
    """Build ``layout`` into the cache unless a current build is there; return its directory.

    Raises:
        BuildFailed: a download, digest, configure or compile step failed (the message names it).
    """
    pin = PINS[layout]
    root = root or cache_root()
    base = root / "llamacpp"
    base.mkdir(parents=True, exist_ok=True)
    with (base / f".{layout}.lock").open("w") as lock:
        # one build per layout at a time, across processes (pytest workers, CI steps)
        fcntl.flock(lock, fcntl.LOCK_EX)
        final = layout_dir(layout, root)
        if not force and is_current(pin, root):
            return final
        for tool in ("cmake", "ninja", "c++"):
            if shutil.which(tool) is None:
                raise BuildFailed(f"building libllama needs {tool} on PATH (apt-get install cmake ninja-build g++)")
        work = base / f"work-{layout}"
        work.mkdir(parents=True, exist_ok=True)
        log = work / "build.log"
        log.write_text("")
        started = time.monotonic()
        sdist = fetch_sdist(pin, base / "downloads", log)
        src = extract_tree(pin, sdist, work / "src")
        build_dir = work / "build"
        shutil.rmtree(build_dir, ignore_errors=True)
        _run(["cmake", "-S", str(src), "-B", str(build_dir), *CMAKE_FLAGS, *EXTRA_FLAGS.get(layout, ())], log,
             "cmake configure")
        compiled = time.monotonic()
        targets = TARGETS.get(layout, ("llama",))
        _run(["cmake", "--build", str(build_dir), "-j2", "--target", *targets], log,
             f"cmake --build --target {' '.join(targets)}")
        compile_seconds = time.monotonic() - compiled
        staging = base / f".{layout}.staging"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        install_outputs(build_dir / "bin", src, staging)
        if not (staging / "libllama.so").exists():
            raise BuildFailed(f"the build wrote no libllama.so into {build_dir / 'bin'}")
        stamp = {
            "inputs": _wanted_stamp(pin),
            "build": pin.build,
            "layout": layout,
            "compile_seconds": round(compile_seconds, 1),
            "total_seconds": round(time.monotonic() - started, 1),
        }
        # the sdist stays in downloads/ (the layout test reads its headers from include/ above)
        return finish(staging, final, stamp, src, build_dir)


def finish(staging: Path, final: Path, stamp: dict[str, object], *scratch: Path) -> Path:
    """Write ``stamp`` as ``staging``'s ``build.json``, put ``staging`` in ``final``'s place, remove the
    ``scratch`` trees (the extracted source, the build directory) and return ``final``."""
    (staging / "build.json").write_text(json.dumps(stamp, indent=2) + "\n")
    shutil.rmtree(final, ignore_errors=True)
    os.replace(staging, final)
    for tree in scratch:
        shutil.rmtree(tree, ignore_errors=True)
    return final


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("layout", nargs="?", default="all", choices=[*PINS, "all"])
    parser.add_argument("--force", action="store_true", help="rebuild even when the stamp is current")
    parser.add_argument("--json", action="store_true", help="print the stamps as JSON")
    args = parser.parse_args(argv)
    layouts = list(PINS) if args.layout == "all" else [args.layout]
    stamps = {}
    for layout in layouts:
        try:
            directory = build(layout, force=args.force)
        except BuildFailed as e:
            print(f"build_libllama: {layout}: {e}", file=sys.stderr)
            return 1
        stamps[layout] = {"dir": str(directory), **(read_stamp(directory) or {})}
        if not args.json:
            print(f"{layout} {directory}")
    if args.json:
        print(json.dumps(stamps, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
