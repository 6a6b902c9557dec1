"""The adapters this release ships, one line each; naming one imports nothing native or heavy.

See docs/adapters.md, "Adding an engine".
"""

from __future__ import annotations

import os
from importlib import import_module
from typing import TYPE_CHECKING

from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.layout import worker_command

if TYPE_CHECKING:
    from superfluid.runtime.adapter import Adapter
    from superfluid.runtime.presentation import Presentation

__all__ = ["IDS", "ALIASES", "get", "presentation", "canonical", "aliases_of", "meant",
           "env_override", "worker_runtime"]

#: runtime id -> module holding its ``ADAPTER``
_ADAPTERS = {
    "basert": "superfluid.runtime.basert.adapter",
    "llamacpp": "superfluid.runtime.llamacpp.adapter",
    "mlx": "superfluid.runtime.mlx.adapter",
}

IDS: tuple[str, ...] = tuple(_ADAPTERS)
#: how a runtime without a presentation of its own is shown: imported when asked, as an adapter is (its
#: records are dataclasses, whose module costs every command a third of a bare start: bench_cli)
_DEFAULT_PRESENTATION = "superfluid.runtime.presentation"


#: another name a runtime is known by -> its id (its check reports them as ``runtime.aliases``)
ALIASES = {"llama.cpp": "llamacpp", "llama-cpp": "llamacpp"}


def canonical(name: str) -> str:
    """The runtime id ``name`` is (an alias answers its runtime's id; anything else as given)."""
    return ALIASES.get(name, name)


def aliases_of(runtime_id: str) -> list[str]:
    """The other names of ``runtime_id``, in ``ALIASES``'s order (its check's ``runtime.aliases``)."""
    return [name for name, rid in ALIASES.items() if rid == runtime_id]


def meant(name: str) -> str:
    """``": did you mean 'x'?"`` when ``name`` is a shipped runtime id misspelt by case or signs
    (``LLAMACPP``, ``base-rt``), else ``""``."""
    plain = "".join(c for c in name.lower() if c.isalnum())
    return next((f": did you mean {i!r}?" for i in IDS if i == plain), "")


def get(runtime_id: str) -> Adapter:
    """The adapter for ``runtime_id``.

    Raises:
        UsageError: no such runtime (names the ones this release ships).
    """
    module = _ADAPTERS.get(runtime_id)
    if module is None:
        raise UsageError(f"no runtime {runtime_id!r}; this superfluid ships: {', '.join(IDS)}{meant(runtime_id)}")
    return import_module(module).ADAPTER  # type: ignore[no-any-return]


def presentation(runtime_id: str) -> Presentation:
    """How the face and the compat manifest show ``runtime_id``: the ``PRESENTATION`` of the module its
    adapter names in ``presentation_from``, imported now; the defaults without one.

    Raises:
        UsageError: no such runtime (as ``get``).
    """
    adapter = get(runtime_id)
    if adapter.presentation_from is None:
        return import_module(_DEFAULT_PRESENTATION).Presentation(adapter.id)  # type: ignore[no-any-return]
    return import_module(adapter.presentation_from).PRESENTATION  # type: ignore[no-any-return]


def worker_runtime(program: str) -> str | None:
    """The runtime whose worker ``program`` is by its name (``superfluid-worker-<id>``), or None."""
    return next((rid for rid in IDS if os.path.basename(program) == worker_command(rid)), None)


def env_override(runtime_id: str) -> str:
    """The variable naming a worker to ask first: ``SUPERFLUID_WORKER_<ID>``."""
    return "SUPERFLUID_WORKER_" + runtime_id.upper().replace("-", "_").replace(".", "_")
