"""Loading libllama and proving it is a build these bindings drive, before the first real call.

See docs/runtimes.md, "How the library is judged, before the first real call".
"""

from __future__ import annotations

import ctypes as C
import os
import re
import sys
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from superfluid.runtime.kernel.errors import BadFile, LibraryRefused
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.layout import install_receipt
from superfluid.runtime.kernel.lookup import Lookup
from superfluid.runtime.kernel.output import counted
from superfluid.runtime.kernel.receipt import read_receipt
from superfluid.runtime.llamacpp import bindings
from superfluid.runtime.llamacpp.layout import Layout, LayoutUnknown, detect

__all__ = ["Library", "LogTail", "load", "echoes_log", "LOG_ENV", "GPU_MODULES"]

LOG_ENV = "SUPERFLUID_LLAMA_LOG"
_GGML_LOG_ERROR = 4
_GGML_LOG_CONT = 5
#: the GPU backend modules a release ships beside libllama (``libggml-<name>.so``) -> the names its
#: backend registers its devices under (lower case)
GPU_MODULES = {"cuda": ("cuda",), "hip": ("rocm", "hip"), "vulkan": ("vulkan",), "sycl": ("sycl",),
               "opencl": ("opencl",), "musa": ("musa",)}
_MODULE = re.compile(r"^libggml-(?P<name>[a-z]+)\.so$")


@dataclass
class LogTail:
    """llama.cpp's log, silenced, keeping the last error lines for messages."""

    echo: bool = False
    errors: deque[str] = field(default_factory=lambda: deque(maxlen=8))
    _last_level: int = 0

    def __call__(self, level: int, text: bytes | None, _user: Any) -> None:
        line = (text or b"").decode("utf-8", "replace")
        if self.echo:
            sys.stderr.write(line)
        if level == _GGML_LOG_CONT:
            level = self._last_level
            if level == _GGML_LOG_ERROR and self.errors:
                self.errors[-1] += line.rstrip("\n")
                return
        self._last_level = level
        if level == _GGML_LOG_ERROR and line.strip():
            self.errors.append(line.rstrip("\n"))

    def last(self) -> str:
        """The kept error lines joined for a message ("" when none)."""
        return " / ".join(self.errors)


@dataclass(kw_only=True)
class Library:
    """A loaded libllama of a known layout, its functions bound for that layout."""

    path: str
    layout: Layout
    fn: dict[str, Any]
    log: LogTail
    context_defaults: bytes  # the library's own llama_context_params defaults (its sizeof bytes)
    model_defaults: bytes
    handle: C.CDLL
    #: the GPU modules beside it that registered no device, each with why (the loader's words:
    #: ``libcudart.so.12: cannot open shared object file: No such file or directory``)
    unloaded: dict[str, str] = field(default_factory=dict)

    @property
    def version(self) -> str:
        """``llama.cpp <build>`` from an install receipt beside the lib dir, else from ``llama_version()``."""
        build = self.build
        if build:
            return f"llama.cpp {build}"
        fn = self.fn.get("llama_version")
        raw = fn() if fn else None
        if raw:
            return f"llama.cpp {raw.decode('utf-8', 'replace')}"
        return f"llama.cpp (unversioned build {self.path})"

    @property
    def build(self) -> str | None:
        """The build the receipt of the install this library lies in names (``<install>/lib/``),
        if it has one that reads."""
        install = os.path.dirname(os.path.dirname(os.path.abspath(self.path)))
        try:  # a regular file only, within the receipt's cap: a FIFO or a device there is no receipt
            receipt = read_receipt(install_receipt(install))
        except BadFile:
            return None
        return receipt.version if receipt.id == "llamacpp" else None

    def context_params(self) -> C.Structure:
        """A fresh copy of the library's context defaults, in its own layout."""
        return self.layout.context.from_buffer_copy(self.context_defaults)

    def model_params(self) -> C.Structure:
        """A fresh copy of the library's model defaults."""
        return self.layout.model.from_buffer_copy(self.model_defaults)


_loaded: dict[str, Library] = {}
# ctypes callbacks must outlive every call the library may make into them
_keep_alive: list[Any] = []


def _fix() -> Fix:
    """The fix of a libllama this adapter cannot drive: install a build it lists as tested."""
    return Fix.superfluid("runtime", "install", "llamacpp", does="installs a build this adapter lists as tested")


def _refuse(path: str, why: str) -> LibraryRefused:
    return LibraryRefused(path, f"{path} is a llama.cpp this adapter cannot drive: {why}", fix=_fix())


def echoes_log(lookup: Lookup) -> bool:
    """The library's log echoed to stderr as it comes: ``SUPERFLUID_LLAMA_LOG`` (``LOG_ENV``) is ``1``."""
    return lookup.variable(LOG_ENV) == "1"


def load(path: str, *, echo_log: bool = False) -> Library:
    """Load libllama at ``path`` (once per process), refusing anything we cannot drive safely;
    ``echo_log``: the library's log is echoed to stderr as it comes (``LOG_ENV`` is ``1``).

    Raises:
        LibraryRefused: it does not load, lacks a function the adapter calls, or its parameter
            structs fit no tested layout (the message names the field, found and expected value).
    """
    real = os.path.realpath(path)
    if real in _loaded:
        return _loaded[real]
    try:
        handle = C.CDLL(path)
    except OSError as e:
        raise LibraryRefused(path, f"could not load {path}: {e}", fix=_fix()) from e

    absent = bindings.missing(handle)
    if absent:
        more = f" (nor {counted(len(absent) - 1, 'other function')} it calls)" \
            if len(absent) > 1 else ""
        raise _refuse(path, f"it has no {absent[0]}{more}")

    tail = LogTail(echo=echo_log)
    callback = bindings.LogCallback(tail)
    _keep_alive.append(callback)
    log_set = handle._FuncPtr(("llama_log_set", handle))
    log_set.argtypes, log_set.restype = bindings.FUNCTIONS["llama_log_set"]
    log_set(callback, None)

    get_context, get_model = bindings.bind_defaults(handle)
    context_image = get_context().data()
    model_image = get_model().data()
    try:
        layout = detect(context_image, model_image)
    except LayoutUnknown as e:
        raise _refuse(path, str(e)) from e

    fn = bindings.bind(handle, layout)
    lib = Library(
        path=path,
        layout=layout,
        fn=fn,
        log=tail,
        context_defaults=context_image[: C.sizeof(layout.context)],
        model_defaults=model_image[: C.sizeof(layout.model)],
        handle=handle,
    )
    fn["llama_backend_init"]()
    if fn["ggml_backend_dev_count"]() == 0 and "ggml_backend_load_all_from_path" in fn:
        # release builds load their backends (CPU included) as modules beside libllama
        fn["ggml_backend_load_all_from_path"](os.path.dirname(real).encode())
    lib.unloaded = _unloaded_modules(fn, os.path.dirname(real), tail)
    _loaded[real] = lib
    return lib


def _registered(fn: dict[str, Any]) -> set[str]:
    """The backend names (lower case) the registered devices belong to."""
    out = set()
    for i in range(fn["ggml_backend_dev_count"]()):
        reg = fn["ggml_backend_dev_backend_reg"](fn["ggml_backend_dev_get"](i))
        name = fn["ggml_backend_reg_name"](reg) if reg else None
        if name:
            out.add(name.decode("utf-8", "replace").lower())
    return out


def _unloaded_modules(fn: dict[str, Any], directory: str, tail: LogTail) -> dict[str, str]:
    """Each GPU module beside libllama (``GPU_MODULES``) whose backend registered no device, loaded
    once more (``ggml_backend_load``, which says why in the log; else ``dlopen``) for the words of
    why: a module that misses its runtime must say so, never leave the build silently on the CPU."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return {}
    modules = [(n, m["name"]) for n in names if (m := _MODULE.match(n)) and m["name"] in GPU_MODULES]
    if not modules:
        return {}
    registered = _registered(fn)
    out: dict[str, str] = {}
    for file, name in modules:
        if any(r.startswith(GPU_MODULES[name]) for r in registered):
            continue
        path = os.path.join(directory, file)
        if "ggml_backend_load" in fn:
            kept = list(tail.errors)
            tail.errors.clear()
            reg = fn["ggml_backend_load"](path.encode())
            words = tail.last()
            tail.errors.clear()
            tail.errors.extend(kept)
            if reg and any(r.startswith(GPU_MODULES[name]) for r in _registered(fn)):
                continue
            _, _, said = words.partition(f"failed to load {path}: ")
            out[file] = said.strip() or words or "it registers no device here"
        else:
            try:
                C.CDLL(path)
            except OSError as e:
                out[file] = str(e).removeprefix(f"{path}: ")
            else:
                out[file] = "it registers no device here"
    return out
