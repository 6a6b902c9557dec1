"""``superfluid compat``: what this release drives, or (``--release``) another release's verified document."""

from __future__ import annotations

import argparse
import errno
import hashlib
import json
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from superfluid import __version__, catalog
from superfluid.output import print_json, table
from superfluid.runtime import registry
from superfluid.runtime.errors import BadFile, UsageError, WorkerFailed

if TYPE_CHECKING:
    from superfluid.installer.transport.fetcher import Fetcher
    from superfluid.manifest.verdict import DocumentVerdict

__all__ = ["run", "gather", "read_release", "compat_text", "verdict_text", "RELEASE_NAME"]

#: the name this toolchain's release carries in its compat document
RELEASE_NAME = "superfluid-toolchain"
#: bytes a compat document read with --release may have
_MAX_BYTES = 4 << 20
#: bytes a .minisig may have (minisign's own line limits, with room)
_MAX_SIGNATURE_BYTES = 16 << 10


def _part_fault(runtime_id: str, part: Any) -> str | None:
    """Why a runtime's answer is not a compat part, or None (checked against the schema)."""
    from superfluid.manifest.compat import build, release_info
    from superfluid.runtime.schema import errors

    if not isinstance(part, dict):
        return "answered `compat --json` with something other than a JSON object"
    found = errors(build(release_info(RELEASE_NAME, __version__), {runtime_id: part}), "compat")
    if found:
        return f"its `compat --json` answer does not match the compat schema ({found[0]})"
    return None


def _all_valid(answers: Mapping[str, Any]) -> bool:
    """Whether every answer is a compat part: the document of them all checked against the schema
    once per content (the same answers on every run cost no schema library)."""
    from superfluid.manifest.compat import build, release_info
    from superfluid.runtime.schema import validate_once

    if not all(isinstance(part, dict) for part in answers.values()):
        return False
    doc = build(release_info(RELEASE_NAME, __version__), answers)
    try:
        # made from what this package ships: checked once per installation, not once per home
        validate_once(doc, json.dumps(doc, sort_keys=True).encode(), "compat", "superfluid compat", shipped=True)
    except BadFile:
        return False
    return True


def gather(environ: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Every shipped runtime's compat part; (parts by id, reasons by id of those that gave none)."""
    parts: dict[str, Any] = {}
    failed: dict[str, str] = {}
    answers: dict[str, tuple[Any, Any]] = {}
    for runtime_id in registry.IDS:
        try:
            part, _, ref = catalog.answer(runtime_id, ["compat", "--json"], environ, accept=(0,))
        except WorkerFailed as e:
            failed[runtime_id] = str(e)
            continue
        answers[runtime_id] = (part, ref)
    if _all_valid({runtime_id: part for runtime_id, (part, _) in answers.items()}):
        return {runtime_id: part for runtime_id, (part, _) in answers.items()}, failed
    for runtime_id, (part, ref) in answers.items():
        fault = _part_fault(runtime_id, part)
        if fault is not None:
            who = os.path.basename(ref.path) if ref else f"the linked {runtime_id} adapter"
            failed[runtime_id] = f"worker {who}: {fault}"
            continue
        parts[runtime_id] = part
    return parts, failed


class _Beside:
    """The document's place (a file path or an ``http(s)`` URL) and the files read beside it."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.is_url = source.startswith(("https://", "http://"))
        self._fetcher: Fetcher | None = None

    def sibling(self, name: str) -> str:
        """Where a file named ``name`` beside the document is."""
        if self.is_url:
            return urljoin(self.source, name)
        return os.path.join(os.path.dirname(self.source), name)

    def signature(self) -> str:
        """``<source>.minisig`` (for a URL, on its path, before any query)."""
        from superfluid.manifest.release_files import SIGNATURE_SUFFIX

        if not self.is_url:
            return self.source + SIGNATURE_SUFFIX
        parts = urlsplit(self.source)
        return urlunsplit(parts._replace(path=parts.path + SIGNATURE_SUFFIX))

    def _web(self) -> Fetcher:
        if self._fetcher is None:
            from superfluid.installer.transport.fetcher import RequestsFetcher

            # the user named the origin: plain http is theirs to choose
            self._fetcher = RequestsFetcher(plain_http_origins=[self.source])
        return self._fetcher

    def read(self, where: str, *, max_bytes: int, optional: bool = False) -> bytes | None:
        """The bytes at ``where``; None when ``optional`` and it is not there.

        Raises:
            BadFile: a file that cannot be read, or is larger than ``max_bytes``.
            DownloadError: a URL that could not be fetched (a 404 too, unless ``optional``).
        """
        if self.is_url:
            response, body = self._web().get_bytes(where, max_bytes=max_bytes, accept=(404,) if optional else ())
            return None if response.status == 404 else body
        from superfluid.runtime.jsonread import NotRegularFile, read_bytes

        try:  # a regular file (a FIFO or a device is never waited on or read without end)
            body = read_bytes(where, max_bytes=max_bytes, follow=True)
        except NotRegularFile as e:
            if e.errno == errno.EFBIG:
                raise BadFile(where, _too_large(max_bytes)) from None
            raise BadFile(where, f"cannot be read: it {e.strerror}") from None
        except FileNotFoundError:
            if optional:
                return None
            raise BadFile(where, "cannot be read (no such file)",
                          fix=_NAME_ONE) from None
        except OSError as e:
            raise BadFile(where, f"cannot be read ({e.strerror or e})") from None
        if len(body) > max_bytes:
            raise BadFile(where, _too_large(max_bytes))
        return body

    def sha256(self, where: str) -> str | None:
        """The SHA-256 of the file at ``where``, streamed; None when it is not there.

        Raises:
            BadFile: it exists and cannot be read.
            DownloadError: the URL could not be fetched (other than a 404).
        """
        if self.is_url:
            web = self._web()

            def attempt(_: int) -> str | None:
                hashed = hashlib.sha256()  # a retry hashes from the start
                with web.open(where, accept=(404,)) as response:
                    if response.status == 404:
                        return None
                    for chunk in response:
                        hashed.update(chunk)
                return hashed.hexdigest()

            return web.retry(where, attempt)
        digest = hashlib.sha256()
        try:
            if os.path.exists(where) and not os.path.isfile(where):  # a FIFO or a device is never read
                raise BadFile(where, "cannot be read: it is not a regular file")
            with open(where, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise BadFile(where, f"cannot be read ({e.strerror or e})") from None
        return digest.hexdigest()

    def close(self) -> None:
        if self._fetcher is not None:
            self._fetcher.close()


def read_release(source: str, *, keys: list[str] | None = None, home: str | None = None,
                 require_signature: bool = False) -> tuple[dict[str, Any], DocumentVerdict, str]:
    """Read, verify and validate another release's compat document from a file or an ``http(s)`` URL:
    the document, the verdict, and the SHA-256 of its bytes.

    The signature beside it is judged over the bytes as fetched, before the document is parsed;
    the tarball the document names is checked when it is beside it.

    Raises:
        BadFile: unreadable, not JSON, a schema major we do not know, not a compat document; or a
            trusted key file that does not read.
        BadKey: a trusted key file that is not a minisign public key.
        SignatureError: the signature does not verify, its key is not trusted, or (with
            ``require_signature``) there is none; ``BadSignatureFile`` when it does not parse.
        TarballMismatch: the tarball beside it has another SHA-256 than the document says.
        DownloadError: a URL could not be fetched.
    """
    from superfluid.manifest.keys import trusted_keys
    from superfluid.manifest.verdict import judge_release
    from superfluid.runtime.home import home as home_of

    trusted = trusted_keys(home if home is not None else home_of(), keys or [])
    beside = _Beside(source)
    try:
        body = beside.read(source, max_bytes=_MAX_BYTES)
        assert body is not None
        signature_at = beside.signature()
        signature = beside.read(signature_at, max_bytes=_MAX_SIGNATURE_BYTES, optional=True)
        doc, verdict = judge_release(body, signature, trusted, where=source, signature_where=signature_at,
                                     tarball_sha256=lambda name: beside.sha256(beside.sibling(name)),
                                     require=require_signature)
        return doc, verdict, hashlib.sha256(body).hexdigest()
    finally:
        beside.close()


def verdict_text(verdict: DocumentVerdict) -> str:
    """The verdict's lines under the document's tables."""
    line = f"signature: {verdict.text}"
    if verdict.signature == "verified":
        line += f" ({verdict.key_source}); trusted comment: {verdict.trusted_comment}"
    tarball = {"checked": "its SHA-256 checked", "absent": "not beside the document, not checked",
               "unnamed": "none named"}[verdict.tarball]
    return f"{line}\ntarball: {tarball}\n"


#: the fix for a compat document that is not there: the flags that read one
_NAME_ONE = "name an existing compat.json file or an https:// URL (with --release, or --for)"


def _too_large(max_bytes: int) -> str:
    return f"is larger than {max_bytes} bytes; not a compat document (what --release and --for read)"


def _key_flags(args: argparse.Namespace) -> list[str]:
    """``--key`` files, each checked to exist before anything is fetched (exit 2 when not)."""
    keys: list[str] = list(getattr(args, "key", None) or [])
    if (keys or getattr(args, "require_signature", False)) and not args.release:
        raise UsageError("--key and --require-signature go with --release FILE|URL (see 'superfluid compat --help')")
    for path in keys:
        if not os.path.isfile(path):
            raise UsageError(f"--key {path}: no such file (name a minisign public key, e.g. minisign.pub)")
    return keys


def _refuse_service_flags(args: argparse.Namespace) -> None:
    """A flag of the service's question without ``--runtime``/``--service`` is a usage error, not
    silently this release's document."""
    given = [f"--{k[len('ask_'):]}" for k, v in sorted(vars(args).items()) if k.startswith("ask_") and v]
    given += [flag for flag, dest in (("--platform", "platform"), ("--trust-root", "trust_root"),
                                      ("--insecure-no-freshness", "insecure_no_freshness"))
              if getattr(args, dest, None)]
    if given:
        raise UsageError(f"{given[0]} goes with --runtime ID --service URL (which releases drive an engine); "
                         f"without them, `superfluid compat` prints this release's document (see 'superfluid "
                         f"compat --help')")


def _runtime_text(runtime_id: str, part: Mapping[str, Any]) -> str:
    lines: list[str] = []
    if runtime_id not in registry.IDS:
        lines.append(f"{runtime_id}: unknown (a runtime this superfluid does not ship; kept as the document "
                     f"gives it: {', '.join(map(str, part)) or 'empty'})")
        return "\n".join(lines) + "\n"
    shown = registry.get(runtime_id).shown(part)  # what the part means is its adapter's to say
    lines.append(shown.line)
    if shown.rows:
        lines.append(_indent(table(shown.header, shown.rows)))
    names = [o.get("name", "?") for o in part.get("options") or [] if isinstance(o, dict)]
    lines.append(f"  options: {', '.join(names) if names else 'none'}")
    return "\n".join(lines) + "\n"


def _indent(text: str) -> str:
    return "".join(f"  {line}\n" for line in text.splitlines()).rstrip("\n")


def compat_text(doc: Mapping[str, Any]) -> str:
    """A short table per runtime, under the release line."""
    release = doc.get("release") or {}
    head = f"{release.get('name')} {release.get('version')} ({doc.get('schema')})"
    if release.get("tarball"):
        head += f", {release['tarball']} sha256 {release.get('sha256')}"
    blocks = [head + "\n"]
    for runtime_id, part in (doc.get("runtimes") or {}).items():
        blocks.append(_runtime_text(runtime_id, part))
    for runtime_id, why in (doc.get("unanswered") or {}).items():
        blocks.append(f"{runtime_id}: no answer: {why}\n")
    return "\n".join(blocks)


def run(args: argparse.Namespace) -> int:
    """0 the document is complete (or --release was read: verified, or unsigned with a warning); 1 a
    runtime gave no answer, or --release could not be read or verified; 2 a bad flag."""
    from superfluid.manifest.compat import build, release_info, validate

    if args.service or args.runtime:  # which releases drive an engine: asked of a manifest service
        from superfluid.commands.compat_service import run as ask_service

        return ask_service(args)
    _refuse_service_flags(args)
    keys = _key_flags(args)
    verdict: DocumentVerdict | None = None
    if args.release:
        doc, verdict, _ = read_release(args.release, keys=keys, require_signature=args.require_signature)
        failed: dict[str, str] = {}
    else:
        environ = dict(os.environ)
        parts, failed = gather(environ)
        doc = build(release_info(RELEASE_NAME, __version__), parts, unanswered=failed)
        validate(doc, "superfluid compat", once=True)
    if args.json:
        from superfluid.manifest.compat import unknown_runtimes

        shown = {**doc} if verdict is None else {**doc, "verification": verdict.to_json()}
        unknown = unknown_runtimes(doc)
        if unknown:
            shown["unknown_runtimes"] = unknown
        if failed:
            from superfluid.output import error_doc

            shown.update(error_doc("unanswered", f"no compat answer from {', '.join(failed)}: the document "
                                   f"is incomplete and must not be published", 1))
        print_json(shown)
    else:
        sys.stdout.write(compat_text(doc))
        if verdict is not None:
            sys.stdout.write("\n" + verdict_text(verdict))
    if verdict is not None and verdict.signature == "unsigned":
        sys.stderr.write(f"superfluid: warning: {args.release} is unsigned (no .minisig beside it): its content "
                         f"is not verified; --require-signature refuses it\n")
    for runtime_id, why in failed.items():
        sys.stderr.write(f"superfluid: {runtime_id} gave no compat answer: {why}\n")
    return 1 if failed else 0
