"""`python -m pipeline`: the same as `flow-pipeline`."""

import sys

from pipeline.cli import main

sys.exit(main())
