"""``python -m specopt ...`` is the ``specopt`` command."""

import sys

from specopt.cli import main

sys.exit(main())
