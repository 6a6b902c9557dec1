"""Typed errors shared by every layer, each carrying the message a user sees."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from superfluid.runtime.kernel.fixes import ENV_LOG, Fix, FixLike, fixes_of, record_to, remedy

__all__ = [
    "ELSEWHERE",
    "SuperfluidError",
    "UsageError",
    "BadFile",
    "LibraryNotFound",
    "LibraryRefused",
    "AbiRefused",
    "NotServable",
    "ModelLoadFailed",
    "WorkerFailed",
    "InconsistentRelease",
    "guarded",
]


#: the end of a network fault's fix that names another source (``installer.errors``): it fits a command that
#: takes ``--mirror`` and ``--offline``, and the face leaves it out of any other command's hint
ELSEWHERE = ("; or install from elsewhere with --mirror URL|DIR (a mirror or a directory of release files) or "
             "--offline (the download cache)")


class SuperfluidError(Exception):
    """A failure with a message for people: what is wrong, why, and what fixes it.

    ``fix``: the commands that fix it (``Fix`` values, in order; never prose); ``advice``: a next
    step that is not a command ("check the network connection"), prose that names no command.
    Exit code: the one table, ``runtime.kernel.exits``.
    """

    #: what a ``--json`` failure prints around the error document: the report the command made
    #: before it failed (``lock --check``'s changes), or None
    document: dict[str, Any] | None = None

    def __init__(self, message: str, *, fix: FixLike = None, advice: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fixes: tuple[Fix, ...] = fixes_of(fix)
        self.advice = advice

    def __str__(self) -> str:
        return self.text()

    def text(self, fixes: tuple[Fix, ...] | None = None, advice: str | None = None) -> str:
        """The message, its advice and its fixes (``fixes``/``advice``: as the face adapted them)."""
        fixes = self.fixes if fixes is None else fixes
        advice = self.advice if advice is None else advice
        tail = remedy(advice, fixes)
        return f"{self.message}: {tail}" if tail else self.message


class UsageError(SuperfluidError):
    """A bad flag, option value or argument, refused before anything is looked up (exit 2)."""


class BadFile(SuperfluidError):
    """A file we read (recipe, receipt, compat.json, listing, ABI asset) is broken or hostile."""

    def __init__(self, path: str, fault: str, *, json_path: str | None = None, fix: FixLike = None,
                 advice: str | None = None) -> None:
        where = f"{path} at {json_path}" if json_path else path
        super().__init__(f"{where}: {fault}", fix=fix, advice=advice)
        self.path = path
        self.json_path = json_path
        self.fault = fault


class LibraryNotFound(SuperfluidError):
    """No engine library where one was named or searched."""

    def __init__(self, message: str, *, looked: list[str] | None = None, fix: FixLike = None,
                 advice: str | None = None) -> None:
        super().__init__(message, fix=fix, advice=advice)
        self.looked = list(looked or [])


class LibraryRefused(SuperfluidError):
    """An engine library was found but is not the one these bindings drive (symbols, layout, line).

    ``by_abi`` is true when the refusal is the ABI verdict alone (another number, or unnumbered off
    the line); ``stated_version`` and ``stated_abi`` then say what the library states.
    """

    def __init__(self, path: str, message: str, *, fix: FixLike = None, advice: str | None = None,
                 by_abi: bool = False, stated_version: str | None = None, stated_abi: int | None = None) -> None:
        super().__init__(message, fix=fix, advice=advice)
        self.path = path
        self.by_abi = by_abi
        self.stated_version = stated_version
        self.stated_abi = stated_abi


class AbiRefused(LibraryRefused):
    """A library states an ABI number other than ours."""

    def __init__(self, path: str, stated: int, drives: int, *, fix: FixLike = None, advice: str | None = None,
                 version: str | None = None) -> None:
        super().__init__(
            path, f"libbaseRT at {path} states ABI {stated}; this superfluid drives ABI {drives}", fix=fix,
            advice=advice,
            by_abi=True, stated_version=version, stated_abi=stated,
        )
        self.stated = stated
        self.drives = drives


class NotServable(SuperfluidError):
    """serve: the runtime for the model is not installed or cannot run here (exit 4)."""


class ModelLoadFailed(SuperfluidError):
    """A worker could not load the model (exit 3 from a serving worker)."""


class WorkerFailed(SuperfluidError):
    """A worker failed, hung or answered with something other than its contract."""

    def __init__(self, worker: str, reason: str, *, lasting: bool = False) -> None:
        super().__init__(f"worker {worker}: {reason}")
        self.worker = worker
        self.reason = reason
        #: it hung or could not start: asking it something else now would fail the same way
        self.lasting = lasting


class InconsistentRelease(SuperfluidError):
    """A release contradicts itself: two statements of one fact disagree.

    E.g. ``<asset>.sha256`` against the API ``digest``, or ``basert-engine-abi-2.txt`` holding 1.
    """

    def __init__(self, repo: str, tag: str, fault: str, *, asset: str | None = None, expected: str | None = None,
                 got: str | None = None, fix: FixLike = None, advice: str | None = None) -> None:
        where = f"{repo} {tag}" + (f" asset {asset}" if asset else "")
        super().__init__(f"{where}: {fault}", fix=fix, advice=advice)
        self.repo = repo
        self.tag = tag
        self.asset = asset
        self.fault = fault
        self.expected = expected
        self.got = got


def guarded(prog: str, run: Callable[[], int]) -> int:
    """``run()``'s exit code for a program that is not the face (a worker, a release tool): a usage
    error is ``prog: <message>`` on stderr and 2, any other typed error the same and 1. The fixes it
    renders go to the suite's hint report when ``SUPERFLUID_FIX_LOG`` asks (as the face's do)."""
    record_to(os.environ.get(ENV_LOG))
    try:
        return run()
    except UsageError as e:
        sys.stderr.write(f"{prog}: {e}\n")
        return 2
    except SuperfluidError as e:
        sys.stderr.write(f"{prog}: {e}\n")
        return 1
