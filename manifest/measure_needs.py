"""``ci/measure-needs ARCHIVE|DIR``: what a build needs of a Linux host, measured from its shared objects.

See docs/install.md, "What a build needs".
"""

from __future__ import annotations

import json
import os
import sys
import tarfile
import tempfile
from collections.abc import Sequence

from superfluid.manifest.command_line import ManifestParser
from superfluid.runtime.hostfacts.elf import ELFInvalid
from superfluid.runtime.hostfacts.needs import Needs, measure
from superfluid.runtime.kernel.errors import SuperfluidError, UsageError, guarded

__all__ = ["measure_path", "main"]

_PROG = "ci/measure-needs"


def measure_path(path: str) -> Needs:
    """The needs of the build at ``path``: a folder, or a tar archive of one (any compression; its
    members extracted with the standard library's ``data`` filter into a temporary folder).

    Raises:
        UsageError: ``path`` is neither a folder nor a tar archive that reads.
        SuperfluidError: a shared object in it is not an ELF file the loader could read.
    """
    try:
        if os.path.isdir(path):
            return measure(path)
        if not os.path.isfile(path):
            raise UsageError(f"{path}: no such folder or archive")
        with tempfile.TemporaryDirectory(prefix="measure-needs-") as tmp:
            try:
                with tarfile.open(path) as tar:
                    tar.extractall(tmp, filter="data")
            except (tarfile.TarError, OSError) as e:
                raise UsageError(f"{path}: not a tar archive that reads ({e})") from None
            return measure(tmp)
    except ELFInvalid as e:
        raise SuperfluidError(f"{path}: {e}") from None


def _parser() -> ManifestParser:
    p = ManifestParser(prog=_PROG, description="Print what a build needs of a Linux host, as JSON: the newest GLIBC_, "
                                         "GLIBCXX_ and CXXABI_ versions its shared objects need, the libraries "
                                         "they name that it does not carry, and which file needs each.")
    p.add_argument("path", metavar="ARCHIVE|DIR", help="a release archive (.tar.gz ...) or an extracted build")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``ci/measure-needs``: 0 printed; 1 a shared object does not read; 2 a usage error."""
    return guarded(_PROG, lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    sys.stdout.write(json.dumps(measure_path(args.path).to_json(), indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
