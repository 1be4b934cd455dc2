"""`python -m colloc_kit.cli ...`: the `colloc-kit` command, Ctrl-C guarded from its first moment (`command`)."""

import sys

from colloc_kit.cli.command import main

__all__: list[str] = []

sys.exit(main())
