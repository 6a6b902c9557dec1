"""The MLX adapter's declarations: compat, versions and options, from the recipe alone.

See docs/adapters.md, "Worked example: MLX".
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from superfluid.runtime.adapter import Adapter
from superfluid.runtime.contract import capabilities
from superfluid.runtime.kernel.errors import SuperfluidError
from superfluid.runtime.kernel.fixes import Fix
from superfluid.runtime.kernel.layout import has_install_of
from superfluid.runtime.kernel.lookup import Lookup
from superfluid.runtime.kernel.options import Option, options_json
from superfluid.runtime.kernel.ordering import version_key
from superfluid.runtime.mlx.locate import environment, not_here
from superfluid.runtime.planning import Listing, NotInstallable, Plan, Request, install_name

if TYPE_CHECKING:
    from superfluid.runtime.hostfacts.host import Host

__all__ = ["ADAPTER", "MlxAdapter", "OPTIONS", "FORMATS", "TOKENIZER", "CAPABILITIES"]

#: MLX's serve options (SPEC §7): spelled ``--mlx-<name>`` on serve, ``--<name>`` to the worker
OPTIONS: tuple[Option, ...] = (
    Option(name="venv", kind="path",
           description="the Python environment holding mlx and mlx-lm, instead of the installed one"),
    Option(name="prefill-chunk", kind="int", description="prompt tokens evaluated per step while prefilling",
           default=2048,
           minimum=1, maximum=1 << 20),
    Option(name="cache-limit-mb", kind="int",
           description="MLX's buffer cache limit in MiB (0: keep no cache; unset: MLX's default)",
           minimum=0, maximum=1 << 24),
)
#: the model format MLX reads: a directory of Hugging Face files with safetensors weights
FORMATS = [{"id": "mlx", "describe": "an MLX model directory",
            "directory": {"files": ["config.json"], "extensions": ["safetensors"]}}]
#: mlx-lm reads the model's own tokenizer files (Hugging Face's format)
TOKENIZER = {"from": "huggingface"}
#: the static record (``runtime.contract``)
CAPABILITIES = capabilities(kv_bits="no such knob: MLX sizes its KV cache itself")


class MlxAdapter(Adapter):
    """MLX: Python wheels on Apple silicon, served from a private Python."""

    id = "mlx"
    package = "superfluid.runtime.mlx"
    recipe_schema = "mlx-recipe"
    options_from = "superfluid.runtime.mlx.adapter"
    formats_from = "superfluid.runtime.mlx.adapter"
    presentation_from = "superfluid.runtime.mlx.presentation"

    def _tested(self) -> list[dict[str, Any]]:
        return sorted(self.recipe["tested"], key=lambda t: version_key(t["version"]), reverse=True)

    @property
    def python(self) -> str:
        """The full version of the private Python the recipe installs (``3.12.14``)."""
        return str(self.recipe["python"]["version"])

    @property
    def python_line(self) -> str:
        """Its major.minor (``3.12``): what an MLX environment's Python must run."""
        return ".".join(self.python.split(".")[:2])

    def compat(self) -> dict[str, Any]:
        """The tested versions and the Python they run on, the platforms, the options."""
        installs = [{"mlx": t["version"], "mlx_lm": t["mlx_lm"], "python": self.python_line} for t in self._tested()]
        return {"installs": installs, "platforms": list(self.recipe["platforms"]),
                "options": options_json(self.options())}

    def versions(self, host: Host, installed: Collection[str],
                 compat_part: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Each tested version, newest first: installable here or why not (no network)."""
        reason = not_here(host, self.recipe["platforms"])
        backend = self.recipe["backend"]
        rows = []
        for t in self._tested():
            install = None if reason else install_name(t["version"], backend)
            wheels = t["wheels"]
            rows.append({
                "version": t["version"], "mlx_lm": t["mlx_lm"], "python": self.python,
                "installs": reason or True, "install": install,
                "installed": has_install_of(installed, t["version"]), "tested": True,
                "platforms": list(self.recipe["platforms"]),
                "digest": "pinned" if wheels and all("sha256" in w for w in wheels) else "unpinned",
                "size": sum(int(w.get("size") or 0) for w in wheels) or None,
            })
        return rows

    def plan_for(self, request: Request, host: Host, listing: Listing | None,
                 compat_part: Mapping[str, Any]) -> list[Plan]:
        """MLX runs on Apple silicon only: elsewhere a clear refusal.

        Raises:
            NotInstallable: always on a host other than macOS arm64; on one, the install of wheels
                into a private Python is not part of this toolchain yet.
        """
        raise self._refusal(host)

    def _refusal(self, host: Host) -> NotInstallable:
        """Why nothing of MLX installs on ``host``: another platform, or (on Apple silicon) that the
        private Python is not made by this toolchain yet."""
        reason = not_here(host, self.recipe["platforms"])
        if reason:
            return NotInstallable(f"{reason}: nothing of mlx installs here",
                                  fix=Fix.superfluid("runtime", "versions", "mlx",
                                                     does="lists the tested versions and why each installs here"))
        return NotInstallable("installing MLX (a private Python with pinned wheels) is not done by this toolchain "
                              "yet", advice=f"install mlx and mlx-lm into a Python {self.python_line} virtual "
                                            "environment and name it with --mlx-venv on serve")

    @property
    def repo(self) -> str:
        """MLX installs wheels, not release archives: there is no releases repository to list, and
        asking for one (``install``, ``lock``) is refused with what MLX needs, for any machine.

        Raises:
            NotInstallable: always.
        """
        platforms = ", ".join(sorted(self.recipe["platforms"]))
        raise NotInstallable(f"MLX publishes no release archives to install: it runs on Apple silicon only "
                             f"({platforms}), from the mlx and mlx-lm wheels in a Python {self.python_line} "
                             "environment", advice="on such a Mac, install mlx and mlx-lm into a Python "
                                                   f"{self.python_line} virtual environment and name it with "
                                                   "--mlx-venv on serve",
                             fix=Fix.superfluid("runtime", "versions", "mlx", does="lists the tested versions"))

    def nothing_to_load(self, lookup: Lookup, worker: str) -> SuperfluidError | None:
        """Why ``worker``'s plain ``check`` would find no MLX to probe here: another platform, or no
        MLX environment where it would look (None: there is one, and only the worker probes it)."""
        venv, why = environment({}, lookup, self.recipe["platforms"], worker)
        return SuperfluidError(why) if venv is None else None


ADAPTER = MlxAdapter()
