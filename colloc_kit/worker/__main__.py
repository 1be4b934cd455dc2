"""`python -m colloc_kit.worker --help` lists the options; see colloc_kit.worker.train."""

from .train import leave, main

leave(main())
