"""The words of ``--help``: what each command does, an example or two, and its exit codes."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from superfluid.runtime.registry import IDS

__all__ = ["Help", "HELP", "FLAG_HELP", "RUNTIME_IDS", "either", "describe", "Formatter", "COMMON_EXITS", "children",
           "walk", "find", "dress", "overview", "synopsis"]

#: the exit codes every command shares (SPEC §6.1), worded once
COMMON_EXITS = {
    0: "done",
    1: "a run-time failure (network, verification, install, load, a worker that failed)",
    2: "a usage error: a bad flag or value, refused before anything is looked up or changed",
}


@dataclass(frozen=True, slots=True)
class Help:
    """One command's help page: the summary listed by its parent, a paragraph, examples, exit codes."""

    summary: str
    description: str
    examples: tuple[str, ...]
    exits: tuple[tuple[int, str], ...]

    def epilog(self) -> str:
        lines = ["examples:"]
        lines += [f"  {e}" for e in self.examples]
        lines += ["", "exit codes:"]
        lines += [f"  {code}  {what}" for code, what in self.exits]
        return "\n".join(lines)


def _exits(**special: str) -> tuple[tuple[int, str], ...]:
    """The common codes with a command's own words for some (``_0="installed"``)."""
    words = {**COMMON_EXITS, **{int(k[1:]): v for k, v in special.items()}}
    return tuple(sorted(words.items()))


def either(words: Sequence[str]) -> str:
    """``a, b or c``."""
    return " or ".join(filter(None, (", ".join(words[:-1]), words[-1] if words else "")))


#: the runtimes this release ships, in words: ``basert, llamacpp or mlx``
RUNTIME_IDS = either(IDS)

HELP: dict[str, Help] = {
    "": Help(
        "install, verify and drive superfluid's inference engines",
        "Install, verify and drive superfluid's inference engines (baseRT, llama.cpp, MLX).",
        ("superfluid runtimes", "superfluid runtime install basert", "superfluid runtime check llamacpp --help"),
        _exits(_3="(workers serving) the model did not load",
               _4="(serve) the runtime for the model is not installed or cannot run here"),
    ),
    "version": Help(
        "print the version",
        "Print 'superfluid <version>' (also: superfluid --version, superfluid -V); with --json, "
        "{\"superfluid\": \"<version>\"}.",
        ("superfluid version", "superfluid version --json"),
        ((0, "printed"), (2, "a usage error")),
    ),
    "runtimes": Help(
        "what is installed and ready here",
        "One row per runtime: its state (ready, not installed, broken, missing), the default install, its "
        "version and ABI, the newest version that installs here, its device and who checks it. Never touches "
        "the network; repeats no check while nothing it depends on changed.",
        ("superfluid runtimes", "superfluid runtimes --json | jq -r '.[] | select(.ready == true) | .id'",
         "superfluid runtimes --verify --json"),
        ((0, "the table is the answer, even when nothing is ready"), (2, COMMON_EXITS[2])),
    ),
    "compat": Help(
        "what this release drives (or another release's compat.json)",
        "This release's compat document, merged from every adapter it ships; with --release, another "
        "release's compat.json read from a file or URL, its .minisig verified against the trusted keys "
        "(the package's, $SUPERFLUID_HOME/keys/*.pub, each --key) before it is read. With --service URL (or "
        "$SUPERFLUID_MANIFEST_URL) and --runtime: which superfluid releases drive an engine, newest first with "
        "why, asked of a compat manifest service or its static export (docs/manifest-service.md), each answer "
        "checked fresh against the service's TUF metadata from a root given once (--trust-root FILE or "
        "$SUPERFLUID_MANIFEST_ROOT; kept in $SUPERFLUID_HOME/trust): a rolled-back, frozen, mixed or forged index "
        "is refused; --insecure-no-freshness asks unchecked.",
        ("superfluid compat --json > superfluid.compat.json",
         "superfluid compat --release https://example.org/r/superfluid-0.2.0.compat.json --require-signature",
         "superfluid compat --service https://manifest.example.org --runtime basert --abi 2 --trust-root 1.root.json",
         "superfluid compat --service ./site --runtime llamacpp --build b11549 --platform linux-x64 --json"),
        _exits(_0="the document is complete (or --release was read: verified, or unsigned with a warning; or "
                  "--service answered)",
               _1="a runtime gave no answer, --release could not be read, verified or validated, or --service "
                  "could not be asked or its answer was refused (a rollback, a freeze, mix-and-match, a forged "
                  "or tampered index)"),
    ),
    "runtime": Help(
        "install and manage runtimes",
        "Install, inspect and manage the runtimes (" + RUNTIME_IDS + ") under $SUPERFLUID_HOME/runtimes.",
        ("superfluid runtime install basert", "superfluid runtime versions llamacpp"),
        _exits(),
    ),
    "runtime install": Help(
        "fetch, verify and install a runtime",
        "Choose the newest version that installs here (by ABI number for basert, by the tested-build list "
        "for llama.cpp), download it into the cache with its digest checked, probe it in a worker, then "
        "publish it under $SUPERFLUID_HOME/runtimes/<id>/ in one rename. An install already here from the "
        "same archive is said and left as it is (--reinstall installs it again). Progress goes to stderr (a "
        "bar on a terminal only), the result to stdout.",
        ("superfluid runtime install basert", "superfluid runtime install llamacpp --version b11642 --dry-run",
         "superfluid runtime install basert --reinstall",
         "superfluid runtime install basert --from ./basert-engine-linux-x64-0.4.0.tar.gz --sha256 <hex>",
         "superfluid runtime install basert --mirror /srv/mirror --offline",
         "superfluid runtime install --locked superfluid.lock --mirror https://mirror.example.org/engines/"),
        _exits(_0="installed (or planned, with --dry-run)",
               _1="a run-time failure: network, verification, a refusal of the rules, the staged worker's probe"),
    ),
    "runtime versions": Help(
        "the versions a runtime installs, and which install here",
        "The versions the runtime installs on its own, newest first, judged for this machine from the recipe "
        "alone (no network): whether each installs here, as what, and whether it is installed.",
        ("superfluid runtime versions basert", "superfluid runtime versions llamacpp --json"),
        _exits(_0="answered", _1="the runtime's worker failed, hung or answered something else"),
    ),
    "runtime options": Help(
        "the options a runtime takes on serve",
        "The options the runtime takes, their defaults and accepted values. On serve they are spelled "
        "--<id>-<option> V; on runtime check and to the worker, --<option> V.",
        ("superfluid runtime options llamacpp", "superfluid runtime options basert --json"),
        _exits(_0="answered", _1="the runtime's worker failed, hung or answered something else"),
    ),
    "runtime check": Help(
        "probe a runtime with options (checked before any worker starts)",
        "Ask the runtime's check, with options. Every option value is checked against the runtime's "
        "declaration before any worker starts; when the check fails with options and passes without them, "
        "the options at fault are named. Options are spelled --<option> V or, as on serve, --<id>-<option> V "
        "(--basert-lib P, --llamacpp-lib P); 'superfluid runtime check <id> --help' lists the runtime's options.",
        ("superfluid runtime check basert --basert-lib ./build/libbaseRT.so",
         "superfluid runtime check llamacpp --model tiny.gguf --n-gpu-layers 0 --json"),
        _exits(_0="available (and, with --model, the model reads)",
               _1="not available here, or the model does not read (the reason on stderr; with --json the report's "
                  "error: not-available, model-unreadable, model-not-servable)",
               _2="a usage error: a bad flag or option value, a --model that is a FIFO, a device or not readable"),
    ),
    "runtime update": Help(
        "install the newest installable version beside the current one",
        "Install the newest installable version of the default install's backend family beside it; the old "
        "install stays (remove it with runtime remove), and a pin moves to the new one.",
        ("superfluid runtime update llamacpp", "superfluid runtime update basert --dry-run --json"),
        _exits(_0="updated, planned (--dry-run), or nothing newer installs here",
               _1="not installed, or a run-time failure as install's"),
    ),
    "runtime repair": Help(
        "reinstall an install in place (default: the current one)",
        "Verify an install against the files its receipt records and, only when something differs (or its "
        "worker launcher is not the one this superfluid writes), put it back exactly: its archives by their "
        "recorded digests, from the cache (verified) or fetched again, then one rename. An install whose "
        "receipt does not read or records no files is reinstalled from what its receipt (or its name) says.",
        ("superfluid runtime repair basert", "superfluid runtime repair llamacpp b11642-cpu --offline"),
        _exits(_0="repaired, or nothing to repair", _1="no such install, or a run-time failure as install's"),
    ),
    "runtime verify": Help(
        "check an install's files against its receipt",
        "Hash every file of an install (or of every install of the runtime) and compare it with what its receipt "
        "recorded when it was staged: a file missing, changed (size, SHA-256, link target, executable bit) or "
        "added (an extra .so in lib/ counts) is named, with the command that puts it back. Changes nothing.",
        ("superfluid runtime verify basert", "superfluid runtime verify llamacpp b11642-cpu --json"),
        _exits(_0="every file as its receipt records it",
               _1="a file missing, changed or added; a receipt that records no files or does not read; no such "
                  "install"),
    ),
    "runtime gc": Help(
        "remove old installs of a runtime",
        "Remove the installs beyond the newest N (by version, then install time) that are neither current, "
        "pinned, named by a --lock file, nor broken, in the order remove makes kill-safe.",
        ("superfluid runtime gc basert --keep 1 --dry-run", "superfluid runtime gc llamacpp --lock superfluid.lock"),
        _exits(_0="collected, or nothing to collect", _1="a lock that does not read, or a filesystem fault"),
    ),
    "cache": Help(
        "the download cache: where, how large, prune",
        "The content-addressed download cache under $SUPERFLUID_HOME/cache: its directory, what it holds by kind, "
        "and removing what no install and no kept lock needs.",
        ("superfluid cache du", "superfluid cache prune --older-than 30d --dry-run"),
        _exits(),
    ),
    "cache dir": Help(
        "print the cache's directory",
        "Print the download cache's directory ($SUPERFLUID_HOME/cache).",
        ("superfluid cache dir",),
        ((0, "printed"), (2, COMMON_EXITS[2])),
    ),
    "cache du": Help(
        "what the cache holds, by kind",
        "Bytes and files of the cache by kind: archives an install (or a --keep-lock lock) needs, archives no "
        "install needs (of removed installs), HTTP bodies, partial downloads, and the rest. Changes nothing.",
        ("superfluid cache du", "superfluid cache du --json --keep-lock superfluid.lock"),
        _exits(_1="a --keep-lock lock that does not read"),
    ),
    "cache prune": Help(
        "remove what no install and no kept lock needs",
        "Remove the archives no install (and no --keep-lock lock) needs, HTTP bodies no record names, and partial "
        "downloads nobody writes, last used longer ago than --older-than (default 30d); prints the bytes freed. "
        "What a running install holds is never removed: an install started during a prune works on.",
        ("superfluid cache prune", "superfluid cache prune --older-than 0s --dry-run --json"),
        _exits(_0="pruned (or nothing to prune; with --dry-run, said what would go)",
               _1="a --keep-lock lock that does not read, a cache folder that is a link, a filesystem fault"),
    ),
    "runtime remove": Help(
        "remove an install, or every install with --all",
        "Remove one install (a broken one too), or with --all every install of the runtime; current moves to "
        "the best-ranked install left. Without an install or --all nothing is removed (exit 2).",
        ("superfluid runtime remove basert 0.3.1-cpu", "superfluid runtime remove llamacpp --all --json"),
        _exits(_0="removed", _1="no such install (or none installed), or a filesystem fault",
               _2="a usage error: no install named and no --all, or both"),
    ),
    "runtime list": Help(
        "the installs of a runtime: current, pinned, ready or broken",
        "List every install of a runtime under $SUPERFLUID_HOME/runtimes/<id>: its version, backend and "
        "platform, whether it is current (the default) and pinned, and whether it is ready or broken (its "
        "receipt does not read, or a file it records is missing or not as recorded), with the repair that puts a "
        "broken one back. Reads the home only: no file is hashed (runtime verify does), no worker started.",
        ("superfluid runtime list basert", "superfluid runtime list llamacpp --json"),
        _exits(_0="listed (also when nothing is installed)", _1="a filesystem fault"),
    ),
    "runtime use": Help(
        "pin an install as the default, or --auto to unpin",
        "Pin the install a runtime serves from by default ($SUPERFLUID_HOME/runtimes/<id>/pinned), or with "
        "--auto go back to the best-ranked one. A broken install (its receipt does not read, or a file it "
        "records is gone) is refused, naming the repair; runtime list names the installs there are.",
        ("superfluid runtime use basert 0.3.1-cpu", "superfluid runtime use basert --auto",
         "superfluid runtime use basert 0.4.0-cpu --json"),
        _exits(_0="pinned (or unpinned)", _1="no such install, or a broken one"),
    ),
    "lock": Help(
        "pin the engine builds of a fleet in superfluid.lock",
        "Write superfluid.lock (TOML): for every runtime x platform x kind of machine (--backend: cpu, cuda, "
        "rocm, vulkan, metal, each a set of declared host facts), the install the installer would choose on "
        "such a machine, with every asset's URL, size and SHA-256 as an install settles them. Engines already "
        "locked are kept; flags add targets. --check says what would move and why (a digest changed under the "
        "same name is an error); --upgrade [ID] writes the new choice. See docs/fleet.md.",
        ("superfluid lock --runtime basert --runtime llamacpp --platform linux-x64 --backend cpu --backend cuda",
         "superfluid lock --check", "superfluid lock --upgrade llamacpp", "superfluid lock --check --json"),
        _exits(_0="written or up to date (--check: nothing would move)",
               _1="the network, a release the rules refuse, a broken lock; --check: something would move"),
    ),
    "mirror": Help(
        "a static mirror of what a lock names",
        "Make and check a directory that holds every file a lock names, in the layout --mirror reads; serve "
        "it with any static web server, CDN or object store. Or push those files to an OCI registry, which "
        "--mirror oci://HOST/REPO reads.",
        ("superfluid mirror sync ./engines --lock superfluid.lock", "superfluid mirror verify ./engines",
         "superfluid mirror push oci://registry.example:5000/fleet/engines"),
        _exits(),
    ),
    "mirror sync": Help(
        "fetch every file a lock names into DIR",
        "Fetch every file the lock names into DIR (<owner>/<repo>/releases/download/<tag>/<name>, and each "
        "repository's releases.json), each verified against the lock; resumable, and what is already there "
        "with the right digest is not fetched again.",
        ("superfluid mirror sync ./engines --lock superfluid.lock",),
        _exits(_0="synced", _1="a broken lock, a download or a verification that failed"),
    ),
    "mirror push": Help(
        "push every file a lock names to an OCI registry",
        "Push every file the lock names (archives, their .sha256, ABI assets, each repository's releases.json) "
        "to an OCI distribution registry as artifacts: one manifest per engine install, tagged "
        "<runtime>-<version>-<platform>-<backend>, each file a layer titled by its mirror path. A blob the "
        "registry holds is not sent again. Machines then install with --mirror oci://HOST/REPO. The login is "
        "docker's (~/.docker/config.json, REGISTRY_AUTH_FILE); plain HTTP only to loopback or with --plain-http. "
        "See docs/fleet.md.",
        ("superfluid mirror push oci://registry.example:5000/fleet/engines --lock superfluid.lock",),
        _exits(_0="pushed, or everything was there already",
               _1="a broken lock, a download or verification, the registry refused (its login, the push)"),
    ),
    "mirror verify": Help(
        "recheck DIR against a lock",
        "Recheck every file the lock names in DIR against its digest, and each listing; change nothing.",
        ("superfluid mirror verify ./engines --lock superfluid.lock",),
        _exits(_0="every file verified", _1="a file missing or with other bytes, a listing that disagrees"),
    ),
    "serve": Help(
        "serve a model over an OpenAI-compatible HTTP API",
        "Serve one model: the runtime is --runtime's, else the one whose format the model is (.gguf: "
        "llamacpp, a baseRT model file: basert, an MLX directory: mlx); it must be installed and able to run "
        "here (the check of superfluid runtimes), then a worker process loads the model through ctypes and "
        "answers POST /v1/completions and /v1/chat/completions (streamed with stream: true), GET /v1/models "
        "and /health. The whole line is checked first; each runtime option is spelled --<id>-<option> V. "
        "The startup line on stdout says what serves and from where; SIGTERM or SIGINT stops it and its "
        "worker. docs/host-contract.md is the contract for hosts.",
        ("superfluid serve --model tiny.gguf",
         "superfluid serve --model tiny.base --basert-lib ./build/libbaseRT.so --port 0",
         "superfluid serve --model m.gguf --runtime llamacpp@b11642-cpu --llamacpp-n-gpu-layers 0 --offline"),
        _exits(_0="stopped cleanly by SIGTERM or SIGINT",
               _1="a run-time failure: the address cannot be bound, the worker failed",
               _2=COMMON_EXITS[2] + "; a model no runtime reads; --sessions held by another server",
               _3="the model did not load (the worker's reason)",
               _4="the runtime is not installed or cannot run here (its reason and the command that fixes it)"),
    ),
    "completion": Help(
        "print a shell completion script (bash, zsh or fish)",
        "Print a completion script for the shell, generated from this superfluid's own commands and flags "
        "(and each runtime's options on runtime check).",
        ("source <(superfluid completion bash)          # in ~/.bashrc",
         "superfluid completion zsh > \"${fpath[1]}/_superfluid\"",
         "superfluid completion fish > ~/.config/fish/completions/superfluid.fish"),
        ((0, "printed"), (2, "a usage error (a shell other than bash, zsh, fish)")),
    ),
}


def describe(path: str) -> Help | None:
    """The help of the command at ``path`` (``"runtime install"``; ``""`` for superfluid itself)."""
    return HELP.get(path)


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions re-wrapped to the terminal, epilogs (examples, exit codes) kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(("examples:", "exit codes:")):
            return super()._fill_text(text, width, indent)
        return argparse.HelpFormatter._fill_text(self, text, width, indent)


#: the words of a flag or argument that a parser added without its own help (the same flag says the
#: same thing on every command)
FLAG_HELP = {
    "--json": "print JSON (schema'd) on stdout instead of text; a failure prints {\"error\": {...}}",
    "--offline": "use the download cache only; never open a connection",
    "--untested": "allow a version of another ABI or not tested (the receipt records tested: false)",
    "--dry-run": "print the ordered plans and change nothing",
    "--mirror": "fetch release files from this mirror: an http(s):// URL, a directory or an OCI registry "
                "oci://HOST/REPO (or SUPERFLUID_MIRROR)",
    "--plain-http": "speak plain HTTP to an oci:// registry that is not on loopback (or SUPERFLUID_OCI_PLAIN_HTTP=1)",
    "--auto": "unpin: serve from the best-ranked install",
    "-h": "show this help (flags, examples, exit codes) and exit",
    "-V": "print the version and exit",
    "id": "runtime id: " + RUNTIME_IDS,
    "install": "an install name as `superfluid runtimes` shows it (e.g. 0.4.0-cpu, b11642-cpu)",
}


def children(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands of ``parser`` by name (none for a leaf)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def walk(parser: argparse.ArgumentParser, path: str = "") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command of the tree with its path (``""``, ``"runtime"``, ``"runtime install"``...)."""
    yield path, parser
    for name, child in children(parser).items():
        yield from walk(child, f"{path} {name}".strip())


def find(parser: argparse.ArgumentParser, path: str) -> argparse.ArgumentParser | None:
    """The command at ``path``, or None."""
    for word in path.split():
        parser = children(parser).get(word)  # type: ignore[assignment]
        if parser is None:
            return None
    return parser


def _nonempty(flag: str, metavar: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value == "":
            raise argparse.ArgumentTypeError(f"needs {metavar}, not an empty string")
        return value

    check.__name__ = flag  # argparse names the type in some of its own messages
    return check


def dress(top: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give every command of the tree its help page and every flag its words; make every flag's value
    non-empty (``--release ''`` is a usage error, not "no flag"). Answers ``top``."""
    for path, parser in walk(top):
        page = describe(path)
        parser.formatter_class = Formatter
        if page is not None:
            parser.description = parser.description or page.description
            parser.epilog = parser.epilog or page.epilog()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                action.metavar = action.metavar or "<command>"
                for choice in action._choices_actions:
                    sub = describe(f"{path} {choice.dest}".strip())
                    choice.help = sub.summary if sub else choice.help
                continue
            if action.nargs == argparse.REMAINDER:
                action.metavar = action.metavar or "flags"
            key = action.option_strings[0] if action.option_strings else action.dest
            if action.help is None:
                action.help = FLAG_HELP.get(key)
            takes_value = action.option_strings and action.nargs is None and action.type is None \
                and isinstance(action, (argparse._StoreAction, argparse._AppendAction))
            if takes_value:
                action.type = _nonempty(key, action.metavar if isinstance(action.metavar, str) else "a value")
    return top


def synopsis(path: str, parser: argparse.ArgumentParser) -> str:
    """``runtime install <id> [flags]``: the command, its arguments, and its flags when few."""
    words = [path] if path else []
    flags = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    for a in parser._actions:
        if a.option_strings or isinstance(a, argparse._SubParsersAction):
            continue
        if a.nargs == argparse.REMAINDER:
            words.append("[flags]")
            flags = []
        elif a.choices:
            words.append("|".join(map(str, a.choices)))
        else:
            words.append(f"[<{a.dest}>]" if a.nargs == "?" else f"<{a.dest}>")
    if len(flags) > 2:
        words.append("[flags]")
    for a in flags if len(flags) <= 2 else []:
        words.append(f"[{a.option_strings[-1]}" + (f" {a.metavar}]" if a.metavar else "]"))
    return " ".join(words)


def overview(top: argparse.ArgumentParser) -> str:
    """``superfluid`` with no command: every command's synopsis and summary, then the exit codes."""
    rows: list[tuple[str, str]] = []
    for path, parser in walk(top):
        if not path or children(parser):
            continue
        page = describe(path)
        rows.append((synopsis(path, parser), page.summary if page else ""))
    width = max(len(s) for s, _ in rows) + 2
    head = describe("")
    assert head is not None
    lines = [f"superfluid: {head.summary}", "", "commands:"]
    lines += [f"  {s.ljust(width)}{what}".rstrip() for s, what in rows]
    lines += ["", "Run 'superfluid <command> --help' for a command's flags, examples and exit codes.",
              "Exit codes: 0 done, 1 run-time failure, 2 usage error, 3 model did not load, 4 runtime not",
              "installed or cannot run here (serve). With --json, a failure is {\"error\": {...}} on stdout."]
    return "\n".join(lines) + "\n"
