"""What a notebook uses beside the runs: its set-up and notices, the widget panel, runs in the background.

    setup        `prepare` (a notebook's parameters checked, its device chosen), `table`, `noise_warning`, `warn`
    panel        `ExperimentPanel` and `panel`: a notebook's widget panel in one call (`colloc_kit.widgets`)
    offered      the modes a panel offers on a device, and those it cannot, with why
    toggles      the panel's copy counts as toggle buttons
    readings     a reading's sentences made from the page's numbers, each with the relation it states (02, 06)
    gains        the readings of gains against copies and modes (03, 04, 07, 08)
    fits         the readings of what fits: MIG slices on a card (05), a latency target (10)
    background   a run in a background thread that a kernel interrupt or Stop ends cleanly

    >>> from colloc_kit import notebook
    >>> notebook.prepare.__module__
    'colloc_kit.notebook.setup'
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
