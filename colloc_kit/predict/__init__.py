"""Before a run: a mix's gain predicted from lone runs, the model held against measured runs, ranked advice.

    model        the collocation model: `LoneProfile`, `Config`, `predict` (a mix's gain and binding limit, in words)
    check        the model held against runs: cells, validation, the fit of its constants, error bands
    kept         the reference cells kept on disk between processes, keyed by the sets' bytes and the kit's code
    host         one job with more loader workers, predicted from its lone run (the host's part of a gain)
    advise       ranked configurations, the pairwise table, `confirm` through `colloc_kit.run`
    serve_advise the safe share: the setting that keeps an inference job within its SLO with the most training

    >>> from colloc_kit import predict
    >>> predict.predict.__module__
    'colloc_kit.predict.model'
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
