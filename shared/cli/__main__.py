"""`python -m shared.cli ...`: how one lakehouse command starts another."""

import sys

from shared.cli import main

sys.exit(main())
