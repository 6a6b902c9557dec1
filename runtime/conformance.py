"""The conformance kit: the checks every adapter runs on itself, its worker run as a host runs it.

See docs/adapters.md, "The conformance kit".
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from superfluid.runtime import registry
from superfluid.runtime.contract import (
    DESCRIPTOR_VERSION,
    DEVICE_KEYS,
    REPORT_KEYS,
    RUNTIME_KEYS,
    TOKENIZER_SOURCES,
)
from superfluid.runtime.kernel.errors import UsageError, guarded
from superfluid.runtime.kernel.formats import facts_of, match, reads
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads
from superfluid.runtime.kernel.lookup import read
from superfluid.runtime.kernel.options import Option, parse_flag_pairs, read_options, to_argv
from superfluid.runtime.serve_check import serve_faults

if TYPE_CHECKING:
    from superfluid.runtime.adapter import Adapter

__all__ = ["faults", "declaration_faults", "format_faults", "report_faults", "worker_faults", "spelling_faults",
           "default_worker", "sample", "main", "UNKNOWN_FLAG"]

#: a runtime id: what ``--runtime``, ``--<id>-<option>`` and the home's ``runtimes/<id>/`` take
_ID = re.compile(r"[a-z0-9][a-z0-9._-]*")
#: an option's name, spelled ``--<name>`` to the worker and ``--<id>-<name>`` on serve
_OPTION = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
#: what ``--runtime`` cannot hold in a name: ``@`` names an install, ``=`` a model, ``/`` a path
_NOT_IN_ALIAS = re.compile(r"[\s@=/]")
#: the flag no worker reads, and what it must say of it
UNKNOWN_FLAG = "--no-such-flag"
#: seconds one worker command may take (MLX's check starts Python)
_TIMEOUT = 120.0
#: bytes of a report read (a report is a few KiB)
_MAX_REPORT_BYTES = 4 << 20
_USAGE = "usage: python -m superfluid.runtime.conformance <id> [--worker PATH] [--model PATH [--<option> V]...]"


def declaration_faults(adapter: Adapter) -> list[str]:
    """What is wrong with the adapter's declarations (docs/adapters.md, "The conformance kit", 1)."""
    rid = adapter.id
    found = []
    if not _ID.fullmatch(rid):
        found.append(f"the id {rid!r} is not spelled as a runtime id can be (lowercase letters, digits, '.', '-', "
                     "'_')")
    if rid not in registry.IDS:
        found.append(f"{rid!r} is not in the registry (runtime/registry.py)")
    aliases = registry.aliases_of(rid)
    for i, alias in enumerate(aliases):
        if not alias or _NOT_IN_ALIAS.search(alias):
            found.append(f"the alias {alias!r} cannot be written in --runtime")
        if alias == rid:
            found.append(f"the alias {alias!r} repeats the id")
        elif alias in registry.IDS:
            found.append(f"the alias {alias!r} is another runtime's id")
        if alias in aliases[:i]:
            found.append(f"the alias {alias!r} is declared twice")
    names = [o.name for o in adapter.options()]
    for i, name in enumerate(names):
        if not _OPTION.fullmatch(name) or name == "model":
            found.append(f"the option {name!r} cannot be written --{name} (lowercase words joined by '-', not model)")
        if name in names[:i]:
            found.append(f"the option {name!r} is declared twice")
    facts = adapter.model_facts()
    found += _formats_declared(facts.formats)
    found += _tokenizer_declared(facts.tokenizer)
    found += _capabilities_declared(facts.capabilities)
    return [f"{rid}: {f}" for f in found]


def _formats_declared(formats: Sequence[Mapping[str, Any]]) -> list[str]:
    found = []
    ids = [f.get("id") for f in formats]
    for i, f in enumerate(formats):
        fid, describe = f.get("id"), f.get("describe")
        if not isinstance(fid, str) or not fid or not isinstance(describe, str) or not describe:
            found.append(f"a format needs an id and words for it (describe): {dict(f)}")
            continue
        if fid in ids[:i]:
            found.append(f"the format {fid} is declared twice")
        file, directory = f.get("file"), f.get("directory")
        if (file is None) == (directory is None):
            found.append(f"the format {fid} is neither a file nor a directory, or both")
        elif isinstance(file, Mapping) and not (file.get("extensions") or file.get("magic")):
            found.append(f"the file format {fid} names neither an extension nor a magic, so it matches nothing")
        elif isinstance(directory, Mapping) and not directory.get("extensions"):
            found.append(f"the directory format {fid} names no weights extension, so it matches nothing")
    return found


def _tokenizer_declared(tokenizer: Mapping[str, Any]) -> list[str]:
    source = tokenizer.get("from")
    if source not in TOKENIZER_SOURCES:
        return [f"the tokenizer comes from {source!r}, not one of {', '.join(TOKENIZER_SOURCES)}"]
    if source == "library" and not tokenizer.get("name"):
        return ["a library tokenizer names no library (name)"]
    return []


def _capabilities_declared(record: Mapping[str, Any]) -> list[str]:
    if not record:
        return []
    if record.get("descriptor_version") != DESCRIPTOR_VERSION:
        return [f"the capability record's descriptor_version is {record.get('descriptor_version')!r}, not "
                f"{DESCRIPTOR_VERSION}"]
    found = []
    for section, keys in record.items():
        if section == "descriptor_version":
            continue
        if not isinstance(keys, Mapping):
            found.append(f"the capability section {section} is not an object")
            continue
        for key, value in keys.items():
            if value is not True and not (isinstance(value, str) and value):
                found.append(f"the capability {section}.{key} is {value!r}: true, or why not")
    return found


def sample(folder: str, fmt: Mapping[str, Any]) -> str:
    """An artifact made to ``fmt``'s own rule in ``folder``: a file ``<id>-model.<ext>`` starting with
    its magic, or a directory ``<id>-model`` holding its files and ``weights.<ext>``."""
    file, directory = fmt.get("file"), fmt.get("directory")
    if isinstance(directory, Mapping):
        path = os.path.join(folder, f"{fmt['id']}-model")
        os.makedirs(path, exist_ok=True)
        for name in directory.get("files") or []:
            with open(os.path.join(path, name), "w", encoding="utf-8") as f:
                f.write("{}")
        with open(os.path.join(path, f"weights.{(directory.get('extensions') or ['bin'])[0]}"), "wb"):
            pass
        return path
    spec = file if isinstance(file, Mapping) else {}
    extensions = spec.get("extensions") or []
    path = os.path.join(folder, f"{fmt['id']}-model" + (f".{extensions[0]}" if extensions else ""))
    with open(path, "wb") as f:
        f.write(str(spec.get("magic") or "").encode("latin-1") + bytes(60))
    return path


def _stranger(folder: str) -> str:
    path = os.path.join(folder, "notes.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("not a model\n")
    return path


def format_faults(adapter: Adapter, folder: str) -> list[str]:
    """What is wrong with the adapter's formats and the gate they make (``kernel.formats.reads``), tried
    on artifacts made in ``folder`` (docs/adapters.md, "The conformance kit", 2)."""
    found = []
    formats = adapter.model_facts().formats
    for fmt in formats:
        if _formats_declared([fmt]):
            continue  # named by declaration_faults
        made = sample(folder, fmt)
        if match(fmt, facts_of(made)) is None:
            found.append(f"{fmt['id']} does not match an artifact made to its own rule ({made})")
        if (why := reads(formats, made)) is not None:
            found.append(f"reads refuses {made}, made to its format {fmt['id']}: {why}")
    stranger = _stranger(folder)
    if any(match(f, facts_of(stranger)) is not None for f in formats):
        found.append(f"a text file matches a format ({stranger})")
    if reads(formats, stranger) is None:
        found.append(f"reads accepts a text file ({stranger})")
    if reads(formats, os.path.join(folder, "missing")) is None:
        found.append("reads accepts a path that does not exist")
    return [f"{adapter.id}: {f}" for f in found]


def report_faults(adapter: Adapter, report: Any, code: int) -> list[str]:
    """What is wrong with one plain check report and its exit code (docs/adapters.md, "The conformance kit", 3)."""
    rid = adapter.id
    if not isinstance(report, Mapping):
        return [f"{rid}: its check printed {type(report).__name__}, not a report (a JSON object)"]
    found = [f"its check report has no `{key}`" for key in REPORT_KEYS if key not in report]
    runtime = report.get("runtime")
    if isinstance(runtime, Mapping):
        found += [f"its check report has no `runtime.{key}`" for key in RUNTIME_KEYS if key not in runtime]
        if runtime.get("id") != rid:
            found.append(f"its check report names another runtime: {runtime.get('id')!r}")
        if "aliases" in runtime and runtime.get("aliases") != (aliases := registry.aliases_of(rid)):
            found.append(f"its check report's aliases {runtime.get('aliases')!r} are not the declared "
                         f"{aliases!r}")
    elif "runtime" in report:
        found.append("its check report's runtime is not an object")
    available = report.get("available")
    if "available" in report and available is not True and not (isinstance(available, str) and available):
        found.append(f"available is {available!r}: true, or why not")
    if code != (0 if available is True else 1):
        found.append(f"its check exits {code} and says available: {available!r} (0 when true, else 1)")
    version = runtime.get("version") if isinstance(runtime, Mapping) else None
    if version is not None and (available is not True or not isinstance(version, str)):
        found.append(f"runtime.version is {version!r}: a string when available, else null")
    facts = adapter.model_facts()
    for key, declared in (("formats", facts.formats), ("tokenizer", facts.tokenizer),
                          ("capabilities", facts.capabilities)):
        if key in report and report[key] != declared:
            found.append(f"its check report's `{key}` does not read back to the declaration: {report[key]!r}, "
                         f"declared {declared!r}")
    found += _devices_faults(report.get("devices"), available is True) if "devices" in report else []
    return [f"{rid}: {f}" for f in found]


def _devices_faults(devices: Any, available: bool) -> list[str]:
    if not isinstance(devices, list):
        return [f"devices is {devices!r}, not a list"]
    if devices and not available:
        return [f"devices are {devices!r} while the runtime is not available (none then)"]
    found = []
    for d in devices:
        if not isinstance(d, Mapping) or not set(DEVICE_KEYS) <= set(d):
            found.append(f"the device {d!r} lacks one of {', '.join(DEVICE_KEYS)}")
        elif not isinstance(d["backend"], str) or not d["backend"] or not (
                d["memory"] is None or (isinstance(d["memory"], int) and d["memory"] >= 0)):
            found.append(f"the device {d!r}: a backend's name, and its memory in bytes (or null)")
    return found


def _model_faults(report: Any, code: int, what: str, *, reads: bool | None) -> list[str]:
    """``check --model <what>``: ``model.reads`` answered (a string when ``reads`` is False), exit 1
    unless it reads it."""
    model = report.get("model") if isinstance(report, Mapping) else None
    if not isinstance(model, Mapping) or "reads" not in model or "path" not in model:
        return [f"check --model <{what}> reports no model (path, reads): {report!r}"]
    said = model["reads"]
    if said is not True and not (isinstance(said, str) and said):
        return [f"check --model <{what}>: model.reads is {said!r}: true, or why not"]
    if reads is False and said is True:
        return [f"check --model <{what}> reads it"]
    usable = report.get("available") is True and said is True
    if code != (0 if usable else 1):
        return [f"check --model <{what}> exits {code} (0 only when available and it reads the model, else 1)"]
    return []


@dataclass(frozen=True, slots=True)
class _Ran:
    code: int
    stdout: str
    stderr: str

    def report(self) -> Any:
        lines = self.stdout.strip().splitlines()
        try:
            return loads(lines[-1], max_bytes=_MAX_REPORT_BYTES) if lines else None
        except UntrustedJson:
            return None


def _run(worker: Sequence[str], args: Sequence[str], env: Mapping[str, str]) -> _Ran:
    try:
        done = subprocess.run([*worker, *args], env=dict(env), capture_output=True, text=True, check=False,
                              timeout=_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return _Ran(-1, "", f"{' '.join(worker)} could not run: {e}")
    return _Ran(done.returncode, done.stdout, done.stderr)


def worker_faults(adapter: Adapter, worker: Sequence[str], env: Mapping[str, str], folder: str) -> list[str]:
    """What is wrong with the worker command line ``worker`` (its argv before the command), run as
    a process in the environment ``env`` (docs/adapters.md, "The conformance kit", 4); samples are made in
    ``folder``."""
    rid = adapter.id
    check = _run(worker, ["check"], env)
    if check.code not in (0, 1):
        return [f"{rid}: check exited {check.code}: {check.stderr.strip()[-300:]}"]
    report = check.report()
    if report is None:
        return [f"{rid}: check printed no report (one line of JSON): {check.stdout[-300:]!r}"]
    found = report_faults(adapter, report, check.code)
    usable = isinstance(report, Mapping) and report.get("available") is True
    version = _run(worker, ["version"], env)
    runtime = report.get("runtime") if isinstance(report, Mapping) else None
    said = runtime.get("version") if isinstance(runtime, Mapping) else None
    if usable and (version.code != 0 or version.stdout.strip() != said):
        found.append(f"{rid}: version ({version.code}: {version.stdout.strip()!r}) and check ({said!r}) disagree")
    if not usable and (version.code != 1 or not version.stderr.strip()):
        found.append(f"{rid}: version exits {version.code} on a runtime check calls unusable (1, and why)")
    tries: list[tuple[str, str, bool | None]] = [
        (os.path.join(folder, "no-such-model"), "missing", False), (_stranger(folder), "a text file", False),
        *((sample(folder, f), f"a {f['id']} sample", None) for f in adapter.model_facts().formats
          if not _formats_declared([f]))]
    for path, what, expected in tries:
        ran = _run(worker, ["check", "--model", path], env)
        found += [f"{rid}: {f}" for f in _model_faults(ran.report(), ran.code, what, reads=expected)]
    unknown = _run(worker, ["check", UNKNOWN_FLAG, "x"], env)
    if unknown.code != 2 or f"unknown flag {UNKNOWN_FLAG}" not in unknown.stderr:
        found.append(f"{rid}: check {UNKNOWN_FLAG} x exits {unknown.code} ({unknown.stderr.strip()!r}), not 2 "
                     f"with 'unknown flag {UNKNOWN_FLAG}'")
    return found


def _sample_value(option: Option, folder: str) -> str:
    """A value of ``option``'s shape: its default, else the first it takes (a path: one that does not exist)."""
    if option.default is not None:
        return to_argv({option.name: option.default})[1]
    bound = option.minimum if option.minimum is not None else option.maximum
    by_kind = {"int": str(int(bound or 0)), "float": str(bound or 0), "bool": "false",
               "enum": option.values[0] if option.values else "", "list": "x" if option.item == "str" else "1",
               "path": os.path.join(folder, f"no-such-{option.name}")}
    return by_kind[option.kind]


def spelling_faults(adapter: Adapter, worker: Sequence[str], env: Mapping[str, str], folder: str) -> list[str]:
    """Whether the worker's ``check`` takes every option it declares in both spellings, ``--<option> V``
    and serve's ``--<id>-<option> V`` (the face forwards an option as its user spelled it): a check given
    them all answers a report, exit 0 or 1, never a usage error (docs/adapters.md, "The conformance kit", 5)."""
    rid, declared = adapter.id, adapter.options()
    values = {o.name: _sample_value(o, folder) for o in declared if _OPTION.fullmatch(o.name) and o.name != "model"}
    found = []
    for lead in ("", f"{rid}-") if values else ():
        line = [token for name, raw in values.items() for token in (f"--{lead}{name}", raw)]
        ran = _run(worker, ["check", *line], env)
        if ran.code not in (0, 1) or ran.report() is None:
            found.append(f"{rid}: check {' '.join(line)} exits {ran.code} ({ran.stderr.strip()[-300:]!r}): a worker "
                         f"takes each option as --<option> V and as serve spells it, --{rid}-<option> V")
    return found


def default_worker(adapter: Adapter) -> list[str]:
    """The adapter's worker as its console script runs it: ``python -m <package>.worker``."""
    return [sys.executable, "-m", f"{adapter.package}.worker"]


def faults(adapter: Adapter, *, env: Mapping[str, str], worker: Sequence[str] | None = None,
           model: str | None = None, options: Mapping[str, Any] | None = None) -> list[str]:
    """Every fault the kit finds in ``adapter`` (empty: it conforms), its worker run as ``worker``
    (default ``default_worker``) in the environment ``env`` (a linked adapter's check in process reads
    it too); with ``model``, its ``serve`` of that model too, given ``options`` (``{option: value}``)
    as ``superfluid serve`` forwards them."""
    command = list(worker) if worker else default_worker(adapter)
    found = declaration_faults(adapter)
    with tempfile.TemporaryDirectory(prefix=f"superfluid-conformance-{adapter.id}-") as folder:
        found += format_faults(adapter, folder)
        if adapter.linked:
            report, code = adapter.check([], read(env))
            found += [f"{f} (in process)" for f in report_faults(adapter, report, code)]
        found += worker_faults(adapter, command, env, folder)
        found += spelling_faults(adapter, command, env, folder)
        if model is not None:
            found += serve_faults(adapter, command, env, folder, model, options)
    return found


@dataclass(frozen=True, slots=True)
class _Line:
    runtime_id: str
    worker: list[str] | None
    model: str | None
    options: dict[str, Any]


def _line(argv: Sequence[str]) -> _Line:
    """``<id> [--worker PATH] [--model PATH [--<option> V]...]``, the options checked against the
    runtime's declaration (as ``--<option>`` or ``--<id>-<option>``).

    Raises:
        UsageError: anything else (an unknown id included).
    """
    rest = list(argv)
    if rest[-1:] == ["--worker"]:
        raise UsageError("--worker needs the path of the worker to run")
    if not rest or rest[0].startswith("-"):
        raise UsageError(_USAGE)
    runtime_id = rest.pop(0)
    own: dict[str, str] = {}
    given: list[tuple[str, str]] = []
    for name, value in parse_flag_pairs(rest):
        if name in ("worker", "model"):
            own[name] = value
        else:
            given.append((name, value))
    if given and "model" not in own:
        raise UsageError(f"options are given to serve: name its model with --model PATH ({_USAGE})")
    options = read_options(given, registry.get(runtime_id).options(), runtime_id)
    return _Line(runtime_id, [own["worker"]] if "worker" in own else None, own.get("model"), options)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the kit on one adapter: its faults on stdout, exit 1; else a line saying it conforms, exit 0. The
    kit's face: it reads the environment, once, for the workers it runs."""
    def run() -> int:
        line = _line(sys.argv[1:] if argv is None else argv)
        found = faults(registry.get(line.runtime_id), env=os.environ, worker=line.worker, model=line.model,
                       options=line.options)
        for fault in found:
            sys.stdout.write(f"{fault}\n")
        if found:
            return 1
        serves = f", and it serves {os.path.basename(line.model)} as a host asks" if line.model else ""
        sys.stdout.write(f"{line.runtime_id} conforms: its declarations, formats, check report and worker command "
                         f"line keep the worker contract{serves}\n")
        return 0

    return guarded("superfluid-conformance", run)


if __name__ == "__main__":
    sys.exit(main())
