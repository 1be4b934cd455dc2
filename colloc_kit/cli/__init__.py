"""The `colloc-kit` command, a module per subcommand family (as accelerate's `commands/`), each with its parser and
its handler; `main` builds the parser from them and turns the kit's errors into one line and an exit code.

    command      the console script: Ctrl-C guarded before the heavy imports, then `main`
    main         the parser, `main`, and demo, run, show, status
    info         `colloc-kit info`: the host, GPUs, MPS, the sharing modes and whether each runs here
    data         `colloc-kit data make`: a stand-in dataset in the real format
    run_args     `run`'s flags, declared and read into a spec
    plans        `run --plan`: the cells to run, their time over the GPUs, and whether it fits `--budget-min`
    gains        the gains table under `run` and `show`: the study's gain, the GPU's and the host's part
    mig          `colloc-kit mig plan | propose | show`
    advise       `colloc-kit advise`
    advise_serve `colloc-kit advise --serve`: the setting that keeps an inference job within its SLO
    export       `colloc-kit export mlflow`
    reference    `colloc-kit reference list | export`
    skipped      what a command that reads runs skips or cannot read, named on stderr (one rule for every reader)

    >>> from colloc_kit.cli.main import build_parser
    >>> build_parser().parse_args(["mig", "plan", "3g,2g"]).command
    'mig'
"""

__all__ = ["advise", "advise_serve", "command", "data", "export", "gains", "info", "main", "mig", "plans", "reference",
           "run_args", "skipped"]
