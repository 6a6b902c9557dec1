"""``superfluid mirror push oci://HOST[:PORT]/REPO``: every file a lock names into an OCI registry.

See docs/fleet.md, "From the registry you already run".
"""

from __future__ import annotations

import argparse
import os
import sys

from superfluid.installer.cache.download import progress_for
from superfluid.installer.fleet import lockfile
from superfluid.installer.fleet.push import push
from superfluid.installer.sources.oci.ref import parse_ref
from superfluid.lock_flags import checked_lock
from superfluid.parser import Help, Parser, add_json, exits
from superfluid.runtime.kernel.errors import UsageError
from superfluid.runtime.kernel.output import print_json
from superfluid.settings import settings_of

__all__ = ["HELP", "arguments", "run"]

HELP = Help(
    "push every file a lock names to an OCI registry",
    "Push every file the lock names (archives, their .sha256, ABI assets, each repository's releases.json) "
    "to an OCI distribution registry as artifacts: one manifest per engine install, tagged "
    "<runtime>-<version>-<platform>-<backend>, each file a layer titled by its mirror path. A blob the "
    "registry holds is not sent again. Machines then install with --mirror oci://HOST/REPO. The login is "
    "docker's (~/.docker/config.json, REGISTRY_AUTH_FILE); plain HTTP only to loopback or with --plain-http. "
    "See docs/fleet.md.",
    ("superfluid mirror push oci://registry.example:5000/fleet/engines --lock superfluid.lock",),
    exits(_0="pushed, or everything was there already",
          _1="a broken lock, a download or verification, the registry refused (its login, the push)"),
)


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.1f} kB"


def arguments(p: Parser) -> None:
    p.add_argument("to", metavar="oci://HOST/REPO",
                   help="the registry repository, e.g. oci://registry.example:5000/fleet/engines")
    p.add_argument("--lock", metavar="FILE", help="the lock (default ./superfluid.lock or SUPERFLUID_LOCK)")
    p.add_argument("--plain-http", action="store_true")
    add_json(p)


def run(args: argparse.Namespace) -> int:
    """``mirror push``.

    Raises:
        UsageError: the target is not an ``oci://HOST/REPO`` reference (exit 2).
        SuperfluidError: a broken lock, a download, a verification, the registry (exit 1).
    """
    environ = dict(os.environ)
    path = checked_lock(args.lock, "--lock", environ)
    settings = settings_of(environ, plain_http=args.plain_http, json_mode=args.json)
    config = settings.fetch
    try:
        ref = parse_ref(args.to, plain_http=config.oci_plain_http, named_by="mirror push")
    except ValueError as e:
        raise UsageError(str(e), advice="name a registry repository: oci://HOST[:PORT]/REPO") from None
    lock, digest = lockfile.read(path)
    progress = progress_for(sys.stderr, mode=settings.progress)

    def tell(line: str) -> None:
        if not args.json:
            sys.stderr.write(f"superfluid: {line}\n")

    try:
        done = push(lock, ref, settings, progress=progress, tell=tell)
    finally:
        progress.close()
    if args.json:
        print_json({"registry": f"{ref.host}/{ref.repository}",
                    "lock": {"file": os.path.abspath(path), "sha256": digest},
                    "tags": list(done.tags), "indexes": list(done.indexes),
                    "blobs": {"sent": len(done.sent), "present": len(done.present), "bytes_sent": done.bytes_sent},
                    "manifests": {"sent": done.manifests_sent, "present": done.manifests_present},
                    "bundles": list(done.bundles)})
        return 0
    sys.stdout.write(f"superfluid: {ref.root.rstrip('/')}: {len(done.sent)} blobs sent ({_mb(done.bytes_sent)}), "
                     f"{len(done.present)} already there; {done.manifests_sent} manifests written, "
                     f"{done.manifests_present} already in place ({path}, sha256 {digest[:12]}…)"
                     + (f"; the Sigstore bundles of {', '.join(done.bundles)} pushed as their referrers"
                        if done.bundles else "") + "\n")
    for tag in done.tags:
        sys.stdout.write(f"  {ref.host}/{ref.repository}:{tag}\n")
    return 0
