"""``python -m commsched`` is the ``commsched`` command."""

import sys

from commsched.cli import main

sys.exit(main())
