"""``superfluid compat --service URL --runtime ID --<kind> V``: which superfluid releases drive an engine,
asked of a compat manifest service or its static export, the answer checked fresh against the service's
TUF metadata (docs/cli.md, "`superfluid compat`"; docs/manifest-service.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from superfluid.installer.trust.manifest import fetch_answer
from superfluid.installer.trust.service import ENV_URL, service_base
from superfluid.manifest.routes import Choose, RouteError, asked_by, choose_route
from superfluid.parser import either
from superfluid.runtime import registry
from superfluid.runtime.kernel import schema
from superfluid.runtime.kernel.errors import BadFile, SuperfluidError, UsageError
from superfluid.runtime.kernel.jsonread import UntrustedJson, loads
from superfluid.runtime.kernel.output import print_json, table
from superfluid.runtime.presentation import by_kind
from superfluid.settings import settings_of
from superfluid.trust_flags import trust_from

# Its flags and page are compat's; the dispatch runs this module when the line asks a service
# (commands/compat.py's runs_in), so that a plain compat never loads the service's client.

__all__ = ["run"]

#: bytes of one answer of a manifest service (``--service``)
_SERVICE_MAX_BYTES = 16 << 20


def _question(args: argparse.Namespace) -> Choose:
    """The ``Choose`` route the flags ask (exit 2 when they do not make one)."""
    kinds = by_kind(map(registry.presentation, registry.IDS))  # each --<kind> the parser declared
    if not args.runtime:
        raise UsageError(f"--service asks which releases drive an engine: give --runtime {'|'.join(registry.IDS)} "
                         f"with {either([f'--{k} {asked[0][1].sample}' for k, asked in kinds.items()])}")
    values = {kind: getattr(args, f"ask_{kind}", None) for kind in kinds}
    given = [kind for kind in kinds if values[kind] is not None]
    if len(given) != 1:
        flags = " or ".join(f"--{k}" for k in kinds if k in asked_by(args.runtime)) or either([f"--{k}" for k in kinds])
        raise UsageError(f"--runtime {args.runtime} needs one of {flags}")
    kind = given[0]
    try:
        return choose_route(args.runtime, kind, str(values[kind]), args.platform)
    except RouteError as e:
        name = f"--{e.parameter}" if e.parameter in (*kinds, "platform") else "--runtime"
        raise UsageError(f"{name}: {e.message}") from None


def _not_answered(base: str, route: Choose, status: int, body: bytes) -> SuperfluidError:
    try:
        message = loads(body, max_bytes=_SERVICE_MAX_BYTES)["error"]
    except (UntrustedJson, TypeError, KeyError):
        message = None
    if isinstance(message, str):
        return SuperfluidError(f"{base}: {message}")
    return SuperfluidError(f"{base} has no answer for {route.asked} (HTTP {status}): a static export holds answers "
                           f"only for the values its releases name",
                           advice="ask a running manifest service (or its WSGI application) for any other value")


def _rows(rows: list[dict[str, Any]]) -> str:
    return table(["VERSION", "RELEASE", "WHY"], [[r["version"], r["name"], r["why"]] for r in rows])


def _text(answer: dict[str, Any], base: str) -> str:
    question = answer["question"]
    drives, others, rejected = answer["drives"], answer["others"], answer["rejected"]
    out = []
    if drives:
        out.append(f"releases that drive {question}, newest first ({base}):\n{_rows(drives)}")
    else:
        out.append(f"no release drives {question} ({base})\n")
    if others:
        out.append(f"releases that do not:\n{_rows(others)}")
    if rejected:
        lines = "".join(f"  {r['version'] or '?'} ({r['where']}): {r['reason']}\n" for r in rejected)
        out.append(f"rejected by the service, never chosen:\n{lines}")
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    """``compat --service``: 0 the service answered (whether or not a release drives it); 1 it could not be asked or its
    answer is not one; 2 a bad flag."""
    if args.release or getattr(args, "key", None) or getattr(args, "require_signature", False):
        raise UsageError("--service asks a manifest service; --release, --key and --require-signature read one "
                         "compat.json: give one or the other")
    route = _question(args)
    url = args.service or os.environ.get(ENV_URL, "").strip()
    if not url:
        raise UsageError(f"--runtime asks a compat manifest service: give --service URL (or set {ENV_URL})")
    base = service_base(url)
    trust = trust_from(args.trust_root, args.insecure_no_freshness, settings_of(os.environ))
    got = fetch_answer(base, route.path, trust, max_bytes=_SERVICE_MAX_BYTES, accept=(400, 404))
    status, body = got.status, got.body
    if status != 200:
        raise _not_answered(base, route, status, body)
    where = base + route.path.lstrip("/")
    try:
        answer = loads(body, max_bytes=_SERVICE_MAX_BYTES)
    except UntrustedJson as e:
        raise BadFile(where, f"is not JSON ({e.detail})") from None
    schema.validate(answer, "manifest-choose", where)
    if args.json:
        print_json({**answer, "service": base, "freshness": got.freshness})
    else:
        sys.stdout.write(_text(answer, base))
    return 0
