"""What a reader sees: figures, their one style, and every table.

    plots        plotly figures of the frames `colloc_kit.analysis` gives (`colloc_kit.plots`)
    deferred_iri jsonschema's IRI grammar, which plotly's renderers bring into every kernel, built at its first use
    frontier     the safe-share frontier: training images/s against an inference job's p99, the SLO marked
    partitions   a GPU's partitions drawn: MIG layouts on its memory slices, MPS shares (`plots.mig_layouts`)
    split        each gain split into the host's part and the GPU's part (`plots.gain_split`), and its reading
    style        the kit's one figure style: template, a colour per mode, facets, the mark of a noisy figure
    tables       one formatter for notebooks (HTML), reports and docs (Markdown) and the terminal

    >>> from colloc_kit.views import style
    >>> style.TEMPLATE
    'plotly_white+colloc_kit'
"""

__all__ = ["deferred_iri", "frontier", "partitions", "plots", "split", "style", "tables"]
