"""The command tree of ``superfluid``: argparse parsers made from the command modules, and the overview."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from importlib import import_module
from typing import Any, NamedTuple, NoReturn, Protocol, cast

from superfluid import verbosity
from superfluid.command_index import ROWS
from superfluid.commands import COMMANDS
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.registry import IDS, canonical

# Each command is a module of ``superfluid.commands`` (``COMMANDS`` names them) with three things:
# ``HELP`` (its page: what it does, an example or two, its exit codes), ``arguments(p)`` (its flags,
# declared on its parser) and ``run(args)``. The tree for a command line loads the module of the command
# it names alone; the others are named only (``parser``): --version 1.55x a bare start, 7.29x loading
# every command; runtimes --json computed 4.05x vs 8.12x (benchmarks/bench_cli.py; superfluid.cli, "Start-up").
__all__ = ["Exit", "Parser", "Once", "OnceSwitch", "Pair", "Help", "Runs", "Command", "COMMON_EXITS",
           "exits", "either", "RUNTIME_IDS", "FLAG_HELP", "Formatter", "Verbosity", "add_verbosity",
           "add_json", "load", "runner", "tree", "parser",
           "children", "walk", "find", "synopsis", "overview_rows", "overview", "canonical_ids"]


class Exit(Exception):
    """argparse finished the command line itself (``--help`` printed): exit with ``status``."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


#: the exit codes every command shares (SPEC §6.1), worded once
COMMON_EXITS = {
    0: "done",
    1: "a run-time failure (network, verification, install, load, a worker that failed)",
    2: "a usage error: a bad flag or value, refused before anything is looked up or changed",
}


class Help(NamedTuple):
    """One command's help page: the summary listed by its parent, a paragraph, examples, exit codes.
    Every command is listed on its parent's page (``superfluid cache --help`` names ``dir``, ``du`` and
    ``prune``)."""

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


def exits(**special: str) -> tuple[tuple[int, str], ...]:
    """The common codes with a command's own words for some (``_0="installed"``)."""
    words = {**COMMON_EXITS, **{int(k[1:]): v for k, v in special.items()}}
    return tuple(sorted(words.items()))


def either(words: Sequence[str]) -> str:
    """``a, b or c``."""
    return " or ".join(filter(None, (", ".join(words[:-1]), words[-1] if words else "")))


#: the runtimes this release ships, in words: ``basert, llamacpp or mlx``
RUNTIME_IDS = either(IDS)

#: the pages of superfluid itself and of the groups of commands
_GROUPS: dict[str, Help] = {
    "": Help(
        "install, verify and drive superfluid's inference engines",
        "Install, verify and drive superfluid's inference engines (baseRT, llama.cpp, MLX).",
        ("superfluid runtimes", "superfluid runtime install basert", "superfluid runtime check llamacpp --help"),
        exits(_3="(workers serving) the model did not load",
              _4="(serve) the runtime for the model is not installed or cannot run here"),
    ),
    "runtime": Help(
        "install and manage runtimes",
        "Install, inspect and manage the runtimes (" + RUNTIME_IDS + ") under $SUPERFLUID_HOME/runtimes.",
        ("superfluid runtime install basert", "superfluid runtime versions llamacpp"),
        exits(),
    ),
    "mirror": Help(
        "a static mirror of what a lock names",
        "Make and check a directory that holds every file a lock names, in the layout --mirror reads; serve "
        "it with any static web server, CDN or object store. Or push those files to an OCI registry, which "
        "--mirror oci://HOST/REPO reads.",
        ("superfluid mirror sync ./engines --lock superfluid.lock", "superfluid mirror verify ./engines",
         "superfluid mirror push oci://registry.example:5000/fleet/engines"),
        exits(),
    ),
    "attestation": Help(
        "prove which workflow built a file (Sigstore bundles)",
        "Check GitHub artifact attestations (Sigstore bundles) offline: which repository, workflow and ref built "
        "a file, proven against a pinned trusted root.",
        ("superfluid attestation verify dist/x.tar.gz --bundle x.sigstore.json --repo OWNER/NAME",),
        exits(),
    ),
    "cache": Help(
        "the download cache: where, how large, prune",
        "The content-addressed download cache under $SUPERFLUID_HOME/cache: its directory, what it holds by kind, "
        "and removing what no install and no kept lock needs.",
        ("superfluid cache du", "superfluid cache prune --older-than 30d --dry-run"),
        exits(),
    ),
}

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
    "-q": "print no progress and no notes: the answer, warnings and errors only",
    "-v": "also print each request and each decision as it is made",
    "id": "runtime id: " + RUNTIME_IDS,
    "install": "an install name as `superfluid runtimes` shows it (e.g. 0.4.0-cpu, b11642-cpu)",
}


class Parser(argparse.ArgumentParser):
    """argparse that raises ``UsageError`` instead of exiting, so the face's table decides.

    A command whose line is flags only (``takes_flags_only``: serve) has ``-h`` anywhere ask for its
    help, no abbreviated flag, its faults worded as a worker words them (``--port is given twice``,
    ``--model needs a value``), and what it does not declare kept as ``args.unknown`` for it to judge.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)
        self.flags_only = False
        self.page: Help | None = None

    def takes_flags_only(self) -> None:
        self.flags_only = True
        self.allow_abbrev = False
        self.exit_on_error = False

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            sys.stderr.write(message)
        raise Exit(status)

    def parse_known_args(  # type: ignore[override]
            self, args: Sequence[str] | None = None, namespace: Any = None) -> tuple[Any, list[str]]:
        if not self.flags_only:
            return super().parse_known_args(args, namespace)
        line = list(sys.argv[1:] if args is None else args)
        if "-h" in line or "--help" in line:
            self.print_help()
            self.exit()
        try:
            namespace, unknown = super().parse_known_args(line, namespace)
        except argparse.ArgumentError as e:
            self.error(_flag_words(e))
        namespace.unknown = unknown
        return namespace, []


class _Unloaded:
    """A command the tree names only (its module not loaded; no parser built), one of argparse's
    choices: ``parser`` loads what a line's words name, and argparse takes those same words, so no
    line reaches one."""

    def __init__(self, prog: str) -> None:
        self.prog = prog

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> tuple[Any, list[str]]:
        raise AssertionError(f"{self.prog}: reached by a line whose tree does not load it (superfluid.parser.parser)")


def _flag_words(e: argparse.ArgumentError) -> str:
    """argparse's words for a flag's fault, as a flags-only line says them."""
    flag = e.argument_name or ""
    if e.message.startswith("ignored explicit argument"):
        return f"{flag} takes no value"
    if e.message.startswith("expected one argument"):
        return f"{flag} needs a value"
    return f"{flag} {e.message}".strip()


class Once(argparse.Action):
    """A flag of a flags-only line that takes a value, given at most once, never empty."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if getattr(namespace, self.dest, None) is not None:
            raise argparse.ArgumentError(self, "is given twice")
        if not values:
            raise argparse.ArgumentError(self, "needs a value")
        setattr(namespace, self.dest, values)


class OnceSwitch(argparse._StoreTrueAction):
    """A switch of a flags-only line, given at most once."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if getattr(namespace, self.dest, False) is True:
            raise argparse.ArgumentError(self, "is given twice")
        setattr(namespace, self.dest, True)


class Pair(argparse.Action):
    """A flag of a flags-only line kept as ``(name, value)`` in the order given (``dest`` a list, each
    name at most once), its value checked later by whoever declared it (a runtime option)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        name = self.option_strings[0][2:]
        pairs: list[tuple[str, str]] = list(getattr(namespace, self.dest, None) or [])
        if any(n == name for n, _ in pairs):
            raise argparse.ArgumentError(self, "is given twice")
        setattr(namespace, self.dest, [*pairs, (name, str(values))])


class Runs(Protocol):
    """What the face runs of a command's module, or of the module a flag hands its line to (``runs_in``)."""

    def run(self, args: argparse.Namespace) -> int: ...


class Command(Runs, Protocol):
    """What the tree and the face read of a command's module."""

    HELP: Help

    def arguments(self, p: Parser) -> None: ...


class Verbosity(argparse.Action):
    """``-q/--quiet`` or ``-v/--verbose``, before the command or after it: sets ``superfluid.verbosity``
    as it is parsed (the one place what the line asked is kept: the namespace holds nothing of it); both
    on one line is a usage error."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        asked = verbosity.QUIET if self.dest == "quiet" else verbosity.VERBOSE
        if verbosity.level() not in (verbosity.NORMAL, asked):
            raise UsageError("-q/--quiet and -v/--verbose ask opposite things: give one of them "
                             f"(see '{parser.prog} --help')")
        verbosity.set_level(asked)


def add_verbosity(p: argparse.ArgumentParser) -> None:
    """``-q/--quiet`` and ``-v/--verbose`` on ``p`` (the top and every command)."""
    p.add_argument("-q", "--quiet", action=Verbosity, nargs=0, default=argparse.SUPPRESS, help=FLAG_HELP["-q"])
    p.add_argument("-v", "--verbose", action=Verbosity, nargs=0, default=argparse.SUPPRESS, help=FLAG_HELP["-v"])


def add_json(p: argparse.ArgumentParser) -> None:
    """``--json``, in the words every command gives it."""
    p.add_argument("--json", action="store_true", help=FLAG_HELP["--json"])


def load(path: str) -> Command:
    """The module of the command ``path`` (``"runtime install"``): the dispatch, imported when it runs."""
    return cast(Command, import_module(f"superfluid.commands.{COMMANDS[path]}"))


def runner(module: Command, args: argparse.Namespace, environ: Mapping[str, str]) -> Runs:
    """The module that runs the parsed line: the command's own, or the one in this package its
    ``runs_in(args, environ)`` names when a flag makes the line another command (``runtime install
    --locked`` installs a lock: ``install_locked``), imported by the dispatch as the command's own is,
    so that a command's common form never loads what only another form runs."""
    runs_in = getattr(module, "runs_in", None)
    other = runs_in(args, environ) if runs_in is not None else None
    return module if other is None else cast(Runs, import_module(f"superfluid.commands.{other}"))


def tree(modules: Mapping[str, Command | None]) -> Parser:
    """The command tree of every command in ``modules`` (path -> its module, in ``COMMANDS`` order; None:
    the command is named and nothing more), every page and flag worded (``dress``)."""
    top = Parser(prog="superfluid", add_help=False)
    top.add_argument("-h", "--help", action="store_true", help="show the commands and exit")
    top.add_argument("-V", "--version", action="store_true", help="print the version and exit")
    add_verbosity(top)
    subs: dict[str, Any] = {"": top.add_subparsers(dest="command", parser_class=Parser)}
    # every line has what the dispatch reads of any command (a command's own parser sets its own):
    # its words, the runtime ids it names, and the source flags a hint keeps (takes_source_flags: the
    # command takes both --mirror and --offline, so a hint may suggest them)
    top.set_defaults(sub=None, id=None, rest=(), runtime=None, upgrade=None, mirror=None, offline=False,
                     plain_http=False, takes_source_flags=False)
    pages = dict(_GROUPS)
    # a group none of whose commands is loaded is named only, as they are (its parser not built)
    loaded = {p.rpartition(" ")[0] for p, m in modules.items() if m is not None}
    for path, module in modules.items():
        group, _, name = path.rpartition(" ")
        if group and group not in loaded:
            parent, _, word = group.rpartition(" ")
            if parent in subs:  # else a group above it is named only already
                subs[parent]._name_parser_map.setdefault(word, _Unloaded(f"{subs[parent]._prog_prefix} {word}"))
            continue
        if group not in subs:  # runtime, mirror, cache: a page that lists its commands
            parent, _, word = group.rpartition(" ")
            node = subs[parent].add_parser(word, help=pages[group].summary)
            subs[group] = node.add_subparsers(dest="sub", parser_class=Parser, required=True)
        if module is None:
            subs[group]._name_parser_map[name] = _Unloaded(f"{subs[group]._prog_prefix} {name}")
            continue
        pages[path] = module.HELP
        p = subs[group].add_parser(name, help=module.HELP.summary)
        module.arguments(p)
        add_verbosity(p)
        p.set_defaults(takes_source_flags={"--mirror", "--offline"} <= p._option_string_actions.keys())
    return _dress(top, pages)


def parser(argv: Sequence[str] | None = None) -> Parser:
    """The command tree for the line ``argv``: the module of the command it names loaded (of every
    command under a group it names, for its page: ``runtime``, or ``runtime instal``, which argparse
    refuses with the group's commands), the others named only; none for a line that names no command
    (``--version``, a word that is none, an empty line or one that asks the overview, ``--help``: the
    overview's rows are the generated index's); the whole tree without ``argv``. The top and the groups
    take no flag with a value, so the words argparse takes for the command are the line's first words
    that are not flags."""
    verbosity.reset()  # a new line: what it asks is set as it is parsed
    line = list(argv or ())
    words = [a for a in line if not a.startswith("-")][:2]
    if words and words[0] in COMMANDS:
        words = words[:1]
    if argv is None:
        wanted = list(COMMANDS)
    elif not words:  # the overview (its rows are the index's), --version, or a flag the top refuses
        wanted = []
    else:
        wanted = []
        for k in range(len(words), 0, -1):  # the longest start of the words that names a command or a group
            prefix = " ".join(words[:k])
            if wanted := [p for p in COMMANDS if p == prefix or p.startswith(prefix + " ")]:
                break
    return tree({path: load(path) if path in wanted else None for path in COMMANDS})


def children(node: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands of ``node`` by name (none for a leaf)."""
    for action in node._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {name: p for name, p in action.choices.items() if isinstance(p, argparse.ArgumentParser)}
    return {}


def walk(node: argparse.ArgumentParser, path: str = "") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command of the tree with its path (``""``, ``"runtime"``, ``"runtime install"``...)."""
    yield path, node
    for name, child in children(node).items():
        yield from walk(child, f"{path} {name}".strip())


def find(node: argparse.ArgumentParser, path: str) -> argparse.ArgumentParser | None:
    """The command at ``path``, or None."""
    for word in path.split():
        node = children(node).get(word)  # type: ignore[assignment]
        if node is None:
            return None
    return node


def _columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` answers it (``COLUMNS``, else standard
    output's terminal, else 80), without importing ``shutil``, which imports the archive libraries:
    argparse's formatter imports it for this alone, on every ``add_argument`` of every command (1.7 ms)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions re-wrapped to the terminal, epilogs (examples, exit codes) kept as written."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(("examples:", "exit codes:")):
            return super()._fill_text(text, width, indent)
        return argparse.HelpFormatter._fill_text(self, text, width, indent)


def _nonempty(flag: str, metavar: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value == "":
            raise argparse.ArgumentTypeError(f"needs {metavar}, not an empty string")
        return value

    check.__name__ = flag  # argparse names the type in some of its own messages
    return check


def _dress(top: Parser, pages: Mapping[str, Help]) -> Parser:
    """Give every command of the tree its help page and every flag its words; make every flag's value
    non-empty (``--release ''`` is a usage error, not "no flag"). Answers ``top``."""
    for path, node in walk(top):
        page = pages.get(path)
        node.formatter_class = Formatter
        if page is not None:
            cast(Parser, node).page = page
            node.description = node.description or page.description
            node.epilog = node.epilog or page.epilog()
        for action in node._actions:
            if isinstance(action, argparse._SubParsersAction):
                action.metavar = action.metavar or "<command>"
                for choice in action._choices_actions:
                    sub = pages.get(f"{path} {choice.dest}".strip())
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


def synopsis(path: str, node: argparse.ArgumentParser) -> str:
    """``runtime install <id> [flags]``: the command, its arguments, and its flags when few (``-q``/``-v``,
    which every command takes, are not counted)."""
    words = [path] if path else []
    flags = [a for a in node._actions if a.option_strings and not isinstance(a, (argparse._HelpAction, Verbosity))]
    for a in node._actions:
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


def overview_rows(top: Parser) -> tuple[tuple[str, str], ...]:
    """The overview's rows of the whole tree ``top``: each command's synopsis and summary (what
    ``superfluid/command_index.py`` keeps, made by ``superfluid/command_index_build.py``)."""
    rows: list[tuple[str, str]] = []
    for path, node in walk(top):
        if not path or children(node):
            continue
        page = cast(Parser, node).page
        rows.append((synopsis(path, node), page.summary if page else ""))
    return tuple(rows)


def overview() -> str:
    """``superfluid`` with no command: every command's synopsis and summary, then the exit codes. The
    rows are the generated index's (``command_index.ROWS``, tested equal to ``overview_rows`` of the
    whole tree), so the overview loads no command module."""
    rows = ROWS
    width = max(len(s) for s, _ in rows) + 2
    head = _GROUPS[""]
    lines = [f"superfluid: {head.summary}", "", "commands:"]
    lines += [f"  {s.ljust(width)}{what}".rstrip() for s, what in rows]
    lines += ["", "Run 'superfluid <command> --help' for a command's flags, examples and exit codes.",
              "Exit codes: 0 done, 1 run-time failure, 2 usage error, 3 model did not load, 4 runtime not",
              "installed or cannot run here (serve). With --json, a failure is {\"error\": {...}} on stdout."]
    return "\n".join(lines) + "\n"


def canonical_ids(args: argparse.Namespace) -> None:
    """An alias (``llama.cpp``) named where a runtime id is taken (``<id>``, ``--runtime``,
    ``--upgrade ID``), replaced by that runtime's id, so every command reads and writes under it."""
    args.id, args.runtime, args.upgrade = (_canonical(args.id), _canonical(args.runtime),
                                           _canonical(args.upgrade))


def _canonical(value: object) -> object:
    """A runtime id or a list of them with every alias replaced; anything else as it is."""
    if isinstance(value, str):
        return canonical(value)
    if isinstance(value, list):
        return [canonical(v) if isinstance(v, str) else v for v in value]
    return value
