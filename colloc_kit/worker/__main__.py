"""`python -m colloc_kit.worker --help` lists the options; see colloc_kit.worker.train."""

from colloc_kit.worker.train import leave, main

__all__: list[str] = []

leave(main())
