"""``superfluid runtime install <id> --for FILE|URL|VERSION``: the install planned for another release.

See docs/cli.md, "`superfluid runtime install <id> [flags]`".
"""

from __future__ import annotations

import argparse
import os

from superfluid.for_release import release_for
from superfluid.install_line import install_line
from superfluid.release_flags import flags_of

# Its flags and page are runtime install's; the dispatch runs this module when the line or the
# environment (SUPERFLUID_FOR) names a release (commands/install.py's runs_in). The release's
# compat document is read and verified (for_release) before anything is planned.

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """``runtime install <id> --for ...``: the line checked as a plain install's, then planned for
    the release named (read and verified before anything is planned).

    Raises:
        UsageError: a bad flag value or runtime id (exit 2).
        SuperfluidError: the release's document cannot be read or verified, or as ``runtime install``.
    """
    environ = dict(os.environ)
    return install_line(args, environ, lambda settings: release_for(flags_of(args), settings, environ))
