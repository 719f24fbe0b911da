"""`python -m lakehouse.cli ...`: how one lakehouse command starts another."""

import sys

from lakehouse.cli import main

sys.exit(main())
