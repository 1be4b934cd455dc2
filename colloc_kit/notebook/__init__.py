"""What a notebook uses beside the runs: its set-up and notices, the widget panel, runs in the background.

    setup        `prepare` (a notebook's parameters checked, its device chosen), `table`, `noise_warning`, `warn`
    panel        `ExperimentPanel` and `panel`: a notebook's widget panel in one call (`colloc_kit.widgets`)
    readings     a reading's sentences made from the page's numbers, each with the relation it states
    background   a run in a background thread that a kernel interrupt or Stop ends cleanly

    >>> from colloc_kit import notebook
    >>> notebook.prepare.__module__
    'colloc_kit.notebook.setup'
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
