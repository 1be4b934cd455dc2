"""`python -m colloc_kit.worker --help` lists the options; see colloc_kit.worker.train."""

import sys

from .train import main

sys.exit(main())
