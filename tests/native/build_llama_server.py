#!/usr/bin/env python3
"""Build llama.cpp's own ``llama-server`` from the sdist tree the ``v2`` libllama is built from.

``benchmarks/bench_serve.py`` measures ``superfluid serve`` against the engine's own server (issue 45):
the same llama.cpp tree (``xllamacpp==2026.10.11549``, b11549), the same libllama, the same model.
The sdist is fetched, verified and unpacked by ``build_libllama.py`` (its ``fetch_sdist`` and
``extract_tree``); this script adds the parts the server reads (``common``, ``tools``, ``scripts``) and
builds the ``llama-server`` cmake target only, offline: ``LLAMA_USE_PREBUILT_UI=OFF`` (the default
downloads the web UI at build time), ``LLAMA_BUILD_UI=OFF`` (no npm), no curl, no OpenSSL, and
``GGML_NATIVE=OFF`` as the libllama builds.

**The same engine.** The server is built with shared libraries and its RUNPATH set to
``$ORIGIN:$ORIGIN/../v2``; only the server and the libraries libllama's build does not make
(``libllama-common``, ``libmtmd``, ``libllama-server-impl``) are installed, so at run time the loader
finds ``libllama.so.0`` and ``libggml*.so.0`` in the cached ``v2`` build beside it, the very files
``superfluid serve --llamacpp-lib <v2>`` loads. ``check_links`` asks ``ldd`` to prove it.

The result goes to ``$SUPERFLUID_NATIVE_CACHE/llamacpp/server/`` with ``build.json``, the stamp of
its pinned inputs (and of the v2 build's); it is rebuilt only when they change. About 18 minutes on
2 cores at low priority, so CI never builds it (``scripts/build-native`` builds libllama only).

Usage: ``build_llama_server.py [--force] [--json]`` prints ``server <dir>``; exit 0 when built, 1 with
the reason otherwise.
"""

from __future__ import annotations

import argparse
import fcntl
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType


def _sibling(name: str) -> ModuleType:
    """``tests/native/<name>.py`` as a module, under the key the tests and benchmarks load it by
    (``_sf_native_<name>``), so that one process holds one copy."""
    key = f"_sf_native_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, Path(__file__).resolve().parent / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


build_libllama = _sibling("build_libllama")

# Bump when the recipe below changes in a way the pins do not show (flags, copied files).
RECIPE_REVISION = 1
#: the libllama layout the server runs on (its RUNPATH names this directory beside ``server/``)
ENGINE = "v2"
LAYOUT = "server"
TARGET = "llama-server"

CMAKE_FLAGS = (
    "-G",
    "Ninja",
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=ON",
    "-DLLAMA_BUILD_COMMON=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_APP=OFF",
    # offline: no web UI fetched at build time, none built with npm
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_CURL=OFF",
    "-DGGML_NATIVE=OFF",
    # the build tree uses the installed RUNPATH: itself, then the v2 libllama beside it
    "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
    f"-DCMAKE_INSTALL_RPATH=$ORIGIN;$ORIGIN/../{ENGINE}",
)

#: what the server build reads beyond libllama's parts
TREE_PARTS = (*build_libllama.TREE_PARTS, "common", "tools", "scripts")


def server_dir(root: Path | None = None) -> Path:
    """Where the built ``llama-server`` lives."""
    return Path(build_libllama.layout_dir(LAYOUT, root))


def _wanted_stamp() -> dict[str, object]:
    pin = build_libllama.PINS[ENGINE]
    return {"engine": build_libllama._wanted_stamp(pin), "cmake": list(CMAKE_FLAGS), "target": TARGET,
            "recipe_revision": RECIPE_REVISION}


def is_current(root: Path | None = None) -> bool:
    """True when the server directory holds a finished build of exactly these pinned inputs."""
    directory = server_dir(root)
    stamp = build_libllama.read_stamp(directory)
    return stamp is not None and stamp.get("inputs") == _wanted_stamp() and (directory / TARGET).exists()


def linked_libraries(binary: Path) -> dict[str, str]:
    """``ldd``'s answer for ``binary``: each needed library's name and the path it resolves to
    (``"not found"`` when it does not)."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False).stdout
    found: dict[str, str] = {}
    for line in out.splitlines():
        name, sep, rest = line.strip().partition(" => ")
        if sep:
            found[name] = rest.split(" (", 1)[0].strip()
    return found


def check_links(directory: Path, engine: Path) -> None:
    """Raise unless ``directory``'s server loads libllama and every libggml from ``engine``.

    Raises:
        BuildFailed: a library is not found, or is found somewhere else.
    """
    links = linked_libraries(directory / TARGET)
    engine_libs = {n: p for n, p in links.items() if n.startswith(("libllama.so", "libggml"))}
    if "libllama.so.0" not in engine_libs:
        raise build_libllama.BuildFailed(f"{directory / TARGET} does not link libllama.so.0: {links}")
    for name, path in engine_libs.items():
        if path == "not found" or Path(path).resolve().parent != engine.resolve():
            raise build_libllama.BuildFailed(f"{directory / TARGET} loads {name} from {path}, not from {engine}")


def _install(bin_dir: Path, dest: Path) -> None:
    """Copy the server and the shared libraries libllama's build does not make into ``dest``."""
    shutil.copy2(bin_dir / TARGET, dest / TARGET)
    for item in sorted(bin_dir.iterdir()):
        if ".so" not in item.name or item.name.startswith(("libllama.so", "libggml")):
            continue
        if item.is_symlink():
            (dest / item.name).symlink_to(os.readlink(item))
        else:
            shutil.copy2(item, dest / item.name)


def build(*, root: Path | None = None, force: bool = False, jobs: int = 2) -> Path:
    """Build ``llama-server`` into the cache unless a current build is there; return its directory.

    Builds (or finds) the ``v2`` libllama first: the server runs on it.

    Raises:
        BuildFailed: a download, digest, configure, compile or link check failed (the message names it).
    """
    root = root or build_libllama.cache_root()
    engine = Path(build_libllama.build(ENGINE, root=root))
    base = root / "llamacpp"
    with (base / f".{LAYOUT}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        final = server_dir(root)
        if not force and is_current(root):
            return final
        work = base / f"work-{LAYOUT}"
        work.mkdir(parents=True, exist_ok=True)
        log = work / "build.log"
        log.write_text("")
        started = time.monotonic()
        pin = build_libllama.PINS[ENGINE]
        sdist = build_libllama.fetch_sdist(pin, base / "downloads", log)
        src = build_libllama.extract_tree(pin, sdist, work / "src", TREE_PARTS)
        build_dir = work / "build"
        shutil.rmtree(build_dir, ignore_errors=True)
        build_libllama._run(["cmake", "-S", str(src), "-B", str(build_dir), *CMAKE_FLAGS], log, "cmake configure")
        compiled = time.monotonic()
        build_libllama._run(["cmake", "--build", str(build_dir), f"-j{jobs}", "--target", TARGET], log,
                            f"cmake --build --target {TARGET}")
        compile_seconds = time.monotonic() - compiled
        staging = base / f".{LAYOUT}.staging"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        _install(build_dir / "bin", staging)
        check_links(staging, engine)
        stamp = {
            "inputs": _wanted_stamp(),
            "build": pin.build,
            "layout": LAYOUT,
            "engine": str(engine),
            "compile_seconds": round(compile_seconds, 1),
            "total_seconds": round(time.monotonic() - started, 1),
        }
        return build_libllama.finish(staging, final, stamp, src, build_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even when the stamp is current")
    parser.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (default 2)")
    parser.add_argument("--json", action="store_true", help="print the stamp as JSON")
    args = parser.parse_args(argv)
    try:
        directory = build(force=args.force, jobs=args.jobs)
    except build_libllama.BuildFailed as e:
        print(f"build_llama_server: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"dir": str(directory), **(build_libllama.read_stamp(directory) or {})}, indent=2))
    else:
        print(f"{LAYOUT} {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
