"""``superfluid-worker-mlx``: the MLX runtime's worker command line."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from superfluid.runtime import contract
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads
from superfluid.runtime.kernel.lookup import Lookup
from superfluid.runtime.mlx.adapter import ADAPTER, CAPABILITIES, FORMATS, TOKENIZER
from superfluid.runtime.mlx.locate import environment
from superfluid.runtime.worker import check_handlers, run

__all__ = ["main", "check_report", "parse_check_args"]
_PROBE_TIMEOUT = 60.0  # seconds: importing mlx in a cold environment is slow
_PROBE = (
    "import json, sys\n"
    "from importlib import metadata\n"
    "import mlx.core as mx\n"
    "info = mx.metal.device_info() if mx.metal.is_available() else {}\n"
    "print(json.dumps({'python': '%d.%d' % sys.version_info[:2], 'mlx': metadata.version('mlx'),\n"
    "                  'mlx_lm': metadata.version('mlx-lm'), 'metal': mx.metal.is_available(),\n"
    "                  'device': info.get('device_name'), 'memory': info.get('memory_size')}))\n"
)


def parse_check_args(argv: Sequence[str]) -> tuple[str | None, dict[str, Any]]:
    """``check``'s flags: the model path and the checked option values (``contract.check_line``), each
    option as ``--<option>`` or ``--mlx-<option>``.

    Raises:
        UsageError: an unknown flag (``unknown flag --x``), a flag without its value, a value of the
            wrong shape, or one option in both spellings.
    """
    return contract.check_line(argv, ADAPTER.options(), ADAPTER.id)


def _probe(venv: str, lookup: Lookup) -> dict[str, Any] | str:
    """The environment's own report of its Python and MLX, or why it gave none."""
    python = os.path.join(venv, "bin", "python")
    env = {k: v for k, v in lookup.variables.items() if not k.startswith("PYTHON")}
    try:
        done = subprocess.run([python, "-I", "-c", _PROBE], stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, env=env, timeout=_PROBE_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return f"{python} did not import mlx within {_PROBE_TIMEOUT:g} s"
    except OSError as e:
        return f"{python} could not start: {e}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return f"{python} cannot import mlx and mlx-lm ({last})"
    try:
        facts = loads(done.stdout.strip().splitlines()[-1], max_bytes=1 << 20)
    except (UntrustedJson, IndexError):
        return f"{python} answered the MLX probe with something other than JSON"
    return facts if isinstance(facts, dict) else f"{python} answered the MLX probe with {facts!r}"


def _model_facts(path: str) -> bool | str:
    if not os.path.isdir(path):
        return f"{path} is not a directory; an MLX model is a directory"
    if not os.path.isfile(os.path.join(path, "config.json")):
        return f"{path} holds no config.json"
    if not any(n.endswith(".safetensors") for n in os.listdir(path)):
        return f"{path} holds no .safetensors weights"
    return True


def _availability(options: Mapping[str, Any], lookup: Lookup) -> tuple[bool | str, dict[str, Any]]:
    venv, why = environment(options, lookup, ADAPTER.recipe["platforms"])
    if venv is None:
        return why, {}
    facts = _probe(venv, lookup)
    if isinstance(facts, str):
        return facts, {}
    want = ADAPTER.python_line
    if facts.get("python") != want:
        return (f"the MLX environment {venv} runs Python {facts.get('python')}, and the MLX runtime "
                f"installs Python {want}: repairing the mlx runtime reinstalls it"), facts
    if not facts.get("metal"):
        return f"MLX in {venv} finds no Metal device", facts
    return True, facts


def check_report(argv: Sequence[str], lookup: Lookup) -> tuple[dict[str, Any], int]:
    """The one-line ``check`` report and its exit code (0 available, 1 not).

    Raises:
        UsageError: a bad flag or option value (exit 2).
    """
    model, options = parse_check_args(argv)
    available, facts = _availability(options, lookup)
    report = contract.report(ADAPTER.id, formats=FORMATS, tokenizer=TOKENIZER, capabilities=CAPABILITIES)
    report["available"] = available
    if available is True:
        report["runtime"]["version"] = f"mlx {facts['mlx']} mlx-lm {facts['mlx_lm']}"
        report["devices"] = [{"backend": "Metal", "name": facts.get("device") or "Apple GPU",
                              "memory": facts.get("memory")}]
    report["platforms"] = list(ADAPTER.recipe["platforms"])
    code = 0 if available is True else 1
    if model is not None:
        reads = _model_facts(model)
        report["model"] = {"path": model, "reads": reads}
        if reads is not True:
            code = 1
    return report, code


def main(argv: Sequence[str] | None = None) -> int:
    """The worker's entry point; the exit code (0 ok, 1 failure, 2 usage)."""
    return run(ADAPTER, argv, check_handlers(check_report))


if __name__ == "__main__":
    sys.exit(main())
