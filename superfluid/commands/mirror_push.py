"""``superfluid mirror push oci://HOST[:PORT]/REPO``: every file a lock names into an OCI registry.

See docs/fleet.md, "From the registry you already run".
"""

from __future__ import annotations

import argparse
import os
import sys

from superfluid.runtime.errors import UsageError

__all__ = ["run"]


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.1f} kB"


def run(args: argparse.Namespace, path: str) -> int:
    """``mirror push``.

    Raises:
        UsageError: the target is not an ``oci://HOST/REPO`` reference (exit 2).
        SuperfluidError: a broken lock, a download, a verification, the registry (exit 1).
    """
    from superfluid.installer.sources.oci.ref import parse_ref

    environ = dict(os.environ)
    try:
        ref = parse_ref(args.to, environ=environ, named_by="mirror push")
    except ValueError as e:
        raise UsageError(str(e), fix="name a registry repository: oci://HOST[:PORT]/REPO") from None
    from superfluid.installer.cache.download import progress_for
    from superfluid.installer.fleet import lockfile
    from superfluid.installer.fleet.push import push

    lock, digest = lockfile.read(path)
    progress = progress_for(sys.stderr, environ=environ, json_mode=args.json)

    def tell(line: str) -> None:
        if not args.json:
            sys.stderr.write(f"superfluid: {line}\n")

    try:
        done = push(lock, ref, environ=environ, progress=progress, tell=tell)
    finally:
        progress.close()
    if args.json:
        from superfluid.output import print_json

        print_json({"registry": f"{ref.host}/{ref.repository}",
                    "lock": {"file": os.path.abspath(path), "sha256": digest},
                    "tags": list(done.tags), "indexes": list(done.indexes),
                    "blobs": {"sent": len(done.sent), "present": len(done.present), "bytes_sent": done.bytes_sent},
                    "manifests": {"sent": done.manifests_sent, "present": done.manifests_present}})
        return 0
    sys.stdout.write(f"superfluid: {ref.root.rstrip('/')}: {len(done.sent)} blobs sent ({_mb(done.bytes_sent)}), "
                     f"{len(done.present)} already there; {done.manifests_sent} manifests written, "
                     f"{done.manifests_present} already in place ({path}, sha256 {digest[:12]}…)\n")
    for tag in done.tags:
        sys.stdout.write(f"  {ref.host}/{ref.repository}:{tag}\n")
    return 0
