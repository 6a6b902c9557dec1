"""``superfluid completion bash|zsh|fish``: a shell completion script, generated from the command tree's
completion model, kept as data (``superfluid/command_index.py``): printing a script loads no other
command."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from superfluid import __version__
from superfluid.command_index import MODEL
from superfluid.completion_model import Model, from_data
from superfluid.parser import Help, Parser

__all__ = ["HELP", "arguments", "render", "SHELLS", "run"]

HELP = Help(
    "print a shell completion script (bash, zsh or fish)",
    "Print a completion script for the shell, generated from this superfluid's own commands and flags "
    "(and each runtime's options on runtime check).",
    ("source <(superfluid completion bash)          # in ~/.bashrc",
     "superfluid completion zsh > \"${fpath[1]}/_superfluid\"",
     "superfluid completion fish > ~/.config/fish/completions/superfluid.fish"),
    ((0, "printed"), (2, "a usage error (a shell other than bash, zsh, fish)")),
)

SHELLS = ("bash", "zsh", "fish")


def arguments(p: Parser) -> None:
    p.add_argument("shell", choices=SHELLS, help="the shell to complete for")


# --- bash and zsh: the same POSIX case tables --------------------------------------------------------------


def _q(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


@dataclass
class _Tables:
    """The model as lookup keys, shared by every rendering. Words: ``sub:<path>:``,
    ``flags:<path>:<id>`` (a runtime's options) before ``flags:<path>:*`` (any id), ``pos:<path>:<n>``.
    Values: ``<path>|<id>|<flag>`` before ``<path>||<flag>``."""

    words: list[tuple[str, str, bool]]  # (key, words, the key ends in a wildcard)
    values: list[tuple[str, str]]
    any_id_values: list[tuple[str, str]]


def _tables(m: Model) -> _Tables:
    specific: list[tuple[str, str, bool]] = []
    general: list[tuple[str, str, bool]] = []
    values: list[tuple[str, str]] = []
    any_id: list[tuple[str, str]] = []
    for c in m.commands:
        if c.subcommands:
            general.append((f"sub:{c.path}:", " ".join(c.subcommands), False))
        for rid, flags in c.by_id.items():
            specific.append((f"flags:{c.path}:{rid}", " ".join(n for f in flags for n in f.names), False))
            values += [(f"{c.path}|{rid}|{n}", f.value) for f in flags if f.value for n in f.names]
        general.append((f"flags:{c.path}:", " ".join(n for f in c.flags for n in f.names), True))
        general += [(f"pos:{c.path}:{i}", kind, False) for i, kind in enumerate(c.positionals)]
        any_id += [(f"{c.path}||{n}", f.value) for f in c.flags if f.value for n in f.names]
    return _Tables(specific + general, values, any_id)


def _posix_tables(m: Model) -> str:
    t = _tables(m)
    lines = [
        "# _superfluid_words sub PATH | flags PATH ID | pos PATH N: the words to offer",
        "_superfluid_words() {",
        '    case "$1:$2:$3" in',
        *[f"        {_q(key)}{'*' if wild else ''}) echo {_q(text)} ;;" for key, text, wild in t.words],
        "    esac",
        "}",
        "# _superfluid_installs ID: the install names under $SUPERFLUID_HOME/runtimes/ID, read now",
        "_superfluid_installs() {",
        '    local d n',
        '    for d in "${SUPERFLUID_HOME:-$HOME/.superfluid}/runtimes/$1"/*; do',
        '        [ -d "$d" ] || continue',
        '        n=${d##*/}',
        '        case "$n" in current|pinned) ;; *) printf \'%s\\n\' "$n" ;; esac',
        "    done",
        "}",
        "# _superfluid_value PATH ID FLAG: what FLAG's value is (file, dir, text, words:...); empty: it takes none",
        "_superfluid_value() {",
        '    case "$1|$2|$3" in',
        *[f"        {_q(key)}) echo {_q(kind)}; return ;;" for key, kind in t.values],
        "    esac",
        '    case "$1||$3" in',
        *[f"        {_q(key)}) echo {_q(kind)} ;;" for key, kind in t.any_id_values],
        "    esac",
        "}",
    ]
    return "\n".join(lines) + "\n"


# the walk over the words before the cursor (indices first..cword-1), in POSIX sh that bash and zsh
# share; each shell spells ``_superfluid_at I`` (the I-th word, 0 = superfluid) its own way
_WALK = """\
    local path="" id="" npos=0 i w kind subs
    i=$first
    while [ "$i" -lt "$cword" ]; do
        w=$(_superfluid_at "$i")
        case "$w" in
            -*)
                case "$w" in *=*) ;; *)
                    kind=$(_superfluid_value "$path" "$id" "$w")
                    if [ -n "$kind" ]; then  # skip its value (bash splits --flag=value into three words)
                        if [ "$(_superfluid_at $((i + 1)))" = "=" ]; then i=$((i + 2)); else i=$((i + 1)); fi
                    fi ;;
                esac ;;
            *)
                subs=" $(_superfluid_words sub "$path") "
                if [ "$npos" -eq 0 ] && [ "$subs" != "  " ] && [ "${subs#* "$w" }" != "$subs" ]; then
                    path="${path:+$path }$w"
                else
                    if [ "$npos" -eq 0 ]; then id=$w; fi
                    npos=$((npos + 1))
                fi ;;
        esac
        i=$((i + 1))
    done
"""

_BASH = """\
# bash completion for superfluid {version}, generated from its commands by `superfluid completion bash`.
# Load it in ~/.bashrc:  source <(superfluid completion bash)
{tables}
_superfluid_at() {{ printf '%s' "${{COMP_WORDS[$1]}}"; }}
_superfluid() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} cword=$COMP_CWORD first=1 prev=""
    # bash splits --flag=value at '=' (COMP_WORDBREAKS): complete the value of the flag before it
    if [ "$cur" = "=" ]; then cur=""; prev=${{COMP_WORDS[COMP_CWORD-1]}}
    elif [ "$COMP_CWORD" -ge 2 ] && [ "${{COMP_WORDS[COMP_CWORD-1]}}" = "=" ]; then prev=${{COMP_WORDS[COMP_CWORD-2]}}
    elif [ "$COMP_CWORD" -ge 2 ]; then prev=${{COMP_WORDS[COMP_CWORD-1]}}
    fi
{walk}    COMPREPLY=()
    case "$prev" in -*=*|"") kind="" ;; -*) kind=$(_superfluid_value "$path" "$id" "$prev") ;; *) kind="" ;; esac
    case "$kind" in
        file) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
        dir) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur")); return 0 ;;
        words:*) COMPREPLY=($(compgen -W "${{kind#words:}}" -- "$cur")); return 0 ;;
        text) return 0 ;;
    esac
    case "$cur" in
        -*) COMPREPLY=($(compgen -W "$(_superfluid_words flags "$path" "$id")" -- "$cur")) ;;
        *)
            subs=$(_superfluid_words sub "$path")
            if [ "$npos" -eq 0 ] && [ -n "$subs" ]; then
                COMPREPLY=($(compgen -W "$subs" -- "$cur"))
            else
                kind=$(_superfluid_words pos "$path" "$npos")
                case "$kind" in
                    file) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")) ;;
                    dir) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur")) ;;
                    words:*) COMPREPLY=($(compgen -W "${{kind#words:}}" -- "$cur")) ;;
                    installs) COMPREPLY=($(compgen -W "$(_superfluid_installs "$id")" -- "$cur")) ;;
                esac
            fi ;;
    esac
    return 0
}}
complete -F _superfluid superfluid
"""

_ZSH = """\
#compdef superfluid
# zsh completion for superfluid {version}, generated from its commands by `superfluid completion zsh`.
# Install: superfluid completion zsh > "${{fpath[1]}}/_superfluid"  (then compinit), or after compinit in
# ~/.zshrc:  source <(superfluid completion zsh)
{tables}
_superfluid_at() {{ printf '%s' "${{words[$(($1 + 1))]}}"; }}
_superfluid() {{
    emulate -L zsh
    setopt sh_word_split null_glob
    local cur=${{words[CURRENT]}} cword=$((CURRENT - 1)) first=1 prev=""
    if [ "$cword" -ge 2 ]; then prev=${{words[CURRENT-1]}}; fi
    case "$cur" in --*=*) prev=${{cur%%=*}}; compset -P '*='; cur=${{cur#*=}} ;; esac
{walk}    case "$prev" in -*=*|"") kind="" ;; -*) kind=$(_superfluid_value "$path" "$id" "$prev") ;; *) kind="" ;; esac
    case "$kind" in
        file) _files; return ;;
        dir) _files -/; return ;;
        words:*) compadd -- ${{kind#words:}}; return ;;
        text) _message 'a value'; return ;;
    esac
    case "$cur" in
        -*) compadd -- $(_superfluid_words flags "$path" "$id") ;;
        *)
            subs=$(_superfluid_words sub "$path")
            if [ "$npos" -eq 0 ] && [ -n "$subs" ]; then
                compadd -- $subs
            else
                kind=$(_superfluid_words pos "$path" "$npos")
                case "$kind" in
                    file) _files ;;
                    dir) _files -/ ;;
                    words:*) compadd -- ${{kind#words:}} ;;
                    installs) compadd -- $(_superfluid_installs "$id") ;;
                esac
            fi ;;
    esac
}}
if [ "${{funcstack[1]}}" = "_superfluid" ]; then
    _superfluid "$@"  # autoloaded from $fpath
elif (( $+functions[compdef] )); then
    compdef _superfluid superfluid
fi
"""


# --- fish -------------------------------------------------------------------------------------------------------


def _fish_tables(m: Model) -> str:
    t = _tables(m)
    lines = ["# __superfluid_words sub|flags|pos PATH [ID|N]: the words to offer, one a line",
             "function __superfluid_words",
             '    switch "$argv[1]:$argv[2]:$argv[3]"']
    for key, text, wild in t.words:
        # fish matches a case's quoted wildcards (an unquoted one would glob files)
        say = "echo" if key.startswith("pos:") else "string split ' ' --"  # a positional's kind is one word
        lines += [f"        case {_q(key + ('*' if wild else ''))}", f"            {say} {_q(text)}"]
    lines += ["    end", "end",
              "# __superfluid_value PATH ID FLAG: what FLAG's value is (file, dir, text, words:...)",
              "function __superfluid_value",
              '    switch "$argv[1]|$argv[2]|$argv[3]"']
    for key, kind in t.values:
        lines += [f"        case {_q(key)}", f"            echo {_q(kind)}; return"]
    lines += ["    end", '    switch "$argv[1]||$argv[3]"']
    for key, kind in t.any_id_values:
        lines += [f"        case {_q(key)}", f"            echo {_q(kind)}; return"]
    lines += ["    end", "end"]
    return "\n".join(lines) + "\n"


_FISH = """\
# fish completion for superfluid {version}, generated from its commands by `superfluid completion fish`.
# Install: superfluid completion fish > ~/.config/fish/completions/superfluid.fish
{tables}
function __superfluid_offer --argument-names kind cur id
    switch "$kind"
        case file
            __fish_complete_path "$cur"
        case dir
            __fish_complete_directories "$cur"
        case 'words:*'
            string split ' ' -- (string replace 'words:' '' -- "$kind")
        case installs
            set -l home $SUPERFLUID_HOME
            test -n "$home"; or set home $HOME/.superfluid
            for d in $home/runtimes/$id/*/
                set -l n (basename $d)
                contains -- $n current pinned; or echo $n
            end
    end
end
function __superfluid_complete
    set -l words (commandline -opc)
    set -l cur (commandline -ct)
    set -l path ''
    set -l id ''
    set -l npos 0
    set -l i 2
    while test $i -le (count $words)
        set -l w $words[$i]
        if string match -q -- '-*' "$w"
            set -l kind (__superfluid_value "$path" "$id" "$w")
            if not string match -q -- '*=*' "$w"; and test -n "$kind"
                set i (math $i + 1)
            end
        else if test $npos -eq 0; and contains -- "$w" (__superfluid_words sub "$path")
            set path (string trim -- "$path $w")
        else
            if test $npos -eq 0
                set id "$w"
            end
            set npos (math $npos + 1)
        end
        set i (math $i + 1)
    end
    set -l prev $words[-1]
    if test (count $words) -gt 1; and string match -q -- '-*' "$prev"; and not string match -q -- '*=*' "$prev"
        set -l kind (__superfluid_value "$path" "$id" "$prev")
        if test -n "$kind"
            __superfluid_offer "$kind" "$cur"
            return
        end
    end
    set -l subs (__superfluid_words sub "$path")
    if string match -q -- '-*' "$cur"
        __superfluid_words flags "$path" "$id"
    else if test $npos -eq 0; and test (count $subs) -gt 0
        printf '%s\n' $subs
    else
        __superfluid_offer (__superfluid_words pos "$path" $npos) "$cur" "$id"
    end
end
complete -c superfluid -f -a '(__superfluid_complete)'
"""


def render(shell: str, m: Model) -> str:
    """The completion script of ``shell`` for model ``m``."""
    if shell == "fish":
        return _FISH.format(version=__version__, tables=_fish_tables(m))
    template = _BASH if shell == "bash" else _ZSH
    return template.format(version=__version__, tables=_posix_tables(m), walk=_WALK)


def run(args: argparse.Namespace) -> int:
    """Print the script; 0 (a shell other than bash, zsh, fish is refused by the parser: exit 2)."""
    sys.stdout.write(render(args.shell, from_data(MODEL)))  # the tree's model, kept as data
    return 0
