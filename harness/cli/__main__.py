"""``python -m harness.cli``: the same as ``et-harness``."""

import sys

from harness.cli.main import main

sys.exit(main())
