from __future__ import annotations

import sys

from superfluid.cli import main

sys.exit(main())
