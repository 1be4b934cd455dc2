"""`colloc-kit batch`: execute the notebooks headless with papermill, each beside an offline HTML report, plus an index.

    colloc-kit batch                              # gpu-quick where torch sees a GPU, else cpu-smoke
    colloc-kit batch --profile paper -p REPEATS=3 --only 03 06 --out batch-runs
    colloc-kit batch --show-code                  # reports with the code cells
    colloc-kit batch --self-contained             # each report one file, plotly.js inlined once: mail it, move it

    >>> report = run_batch("cpu-smoke", out="batch-runs")        # doctest: +SKIP
    >>> report.folder, [n.status for n in report.notebooks]      # doctest: +SKIP

A profile (batch_profiles.yaml) is data: `parameters` for every notebook that declares them, and `notebooks:
{stem: {...}}` for one notebook. Each notebook runs in a fresh kernel of this very Python (ipykernel's own spec for
sys.executable, whatever kernelspecs are installed), with the output folder as its working directory, so the
experiment notebooks write their runs to `<folder>/runs` and the analysis notebook reads them. One failing notebook is
reported with its error cell; the others still run.

The HTML pages are reports for reading (batch_pages.py): code cells hidden (`--show-code` keeps them), the
parameters of the run as a small table, the panel cells (`if INTERACTIVE:`) left out, a failed notebook shown up to
its error. Figures are drawn by one copy of plotly.js per batch folder (`plotly.min.js`, from the plotly package)
that every page references, so pages stay small and work offline; a page without it says so in each figure's place.
`--self-contained` inlines plotly.js once per page instead. No page loads anything from another host (no
require.js, MathJax or widget manager from a CDN). The index lists each notebook's warnings (e.g. a machine too
noisy to compare modes) and the size of each page.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import psutil

from colloc_kit import machine, paths, supervise
from colloc_kit.batch.pages import PLOTLY_JS, PLOTLY_MIME, export_html, flags_of, plotly_js, summary_of, warnings_of
from colloc_kit.batch.profiles import load_profiles
from colloc_kit.batch.parameters import check_contents, check_types
from colloc_kit.batch.record import FAILED, INTERRUPTED, NOT_RUN, OK, BatchReport, NotebookOutcome, where, write_record
from colloc_kit.errors import BadInput
from colloc_kit.gpu import nvml
from colloc_kit.views import deferred_iri

__all__ = ["PLOTLY_JS", "PLOTLY_MIME", "BATCH_PARAMETERS", "OK", "FAILED", "NotebookOutcome", "BatchReport",
           "default_profile", "default_notebooks_dir", "load_profiles", "plan", "select", "run_batch",
           "describe_machine", "copy_plotly_js", "execute", "current_python_kernel_manager",
           "where"]  # PLOTLY_JS, PLOTLY_MIME: batch_pages', for callers

NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"
BATCH_PARAMETERS = {"INTERACTIVE": False, "PLOTLY_RENDERER": "plotly_mimetype"}  # figures as JSON; export draws them
KERNEL_LOG = "kernels.stderr.log"  # the kernels' own stderr, in the batch folder


def default_profile() -> str:
    """gpu-quick where torch sees a CUDA GPU, else cpu-smoke."""
    return "gpu-quick" if nvml.cuda_available() else "cpu-smoke"


def default_notebooks_dir() -> Path:
    """The notebooks/ folder of the checkout this package is installed from."""
    return Path(__file__).resolve().parents[2] / "notebooks"


def plan(profile: str, profiles: Mapping[str, dict], notebooks_dir: Path, overrides: Mapping[str, Any] | None = None,
         only: list[str] | None = None) -> list[tuple[Path, dict]]:
    """(notebook, parameters) for every notebook to run; every name checked before anything runs (BadInput)."""
    deferred_iri.defer()  # papermill imports nbformat, and with it jsonschema
    import papermill  # noqa: PLC0415 - notebook execution, loaded when a batch runs

    if profile not in profiles:
        raise BadInput(f"unknown batch profile {profile!r}; choose one of {', '.join(profiles)}")
    notebooks_dir = Path(notebooks_dir)
    found = sorted(notebooks_dir.glob(NOTEBOOK_GLOB))
    if not found:
        raise BadInput(f"no notebooks ({NOTEBOOK_GLOB}) in {notebooks_dir}; pass --notebooks DIR, "
                       "the notebooks/ folder of a colloc-kit checkout")
    chosen = select(found, only) if only else found
    settings = profiles[profile]
    per_notebook = settings.get("notebooks") or {}
    declared = {nb: _parameters(nb, papermill.inspect_notebook) for nb in chosen}
    unknown = sorted(set(per_notebook) - {nb.stem for nb in found})
    if unknown:
        raise BadInput(f"profile {profile} names notebooks that do not exist: {', '.join(unknown)}")
    overrides = dict(overrides or {})
    unused = sorted(k for k in overrides if not any(k in params for params in declared.values()))
    if unused:
        names = sorted({k for params in declared.values() for k in params})
        raise BadInput(f"no chosen notebook has parameter(s) {', '.join(unused)}; they have: {', '.join(names)}")
    planned = []
    for nb, params in declared.items():
        own = per_notebook.get(nb.stem) or {}
        undeclared = sorted(set(own) - set(params))
        if undeclared:
            raise BadInput(f"profile {profile}: {nb.stem} has no parameter(s) {', '.join(undeclared)}; "
                           f"it has: {', '.join(params)}")
        values = {**BATCH_PARAMETERS, **(settings.get("parameters") or {}), **own, **overrides}
        given = {k: v for k, v in values.items() if k in params and k not in BATCH_PARAMETERS}
        check_types(given, params, nb.stem)
        check_contents(given, nb.stem)
        planned.append((nb, {k: v for k, v in values.items() if k in params}))
    return planned


def _parameters(notebook: Path, inspect: Callable[[str], dict]) -> dict:
    """The parameters `notebook` declares (papermill's `inspect_notebook`); BadInput naming it where it cannot be
    read as a notebook."""
    try:
        return inspect(str(notebook))
    except Exception as exc:  # noqa: BLE001 - not JSON, not a notebook, unreadable: the file is what is wrong
        raise BadInput(f"{paths.shown(notebook)} cannot be read as a notebook ({type(exc).__name__}: {exc}); fix it "
                       f"(e.g. restore it with git), or move it out of {paths.shown(notebook.parent)}") from None


def select(found: list[Path], only: list[str]) -> list[Path]:
    """Notebooks named by stem, number ('03') or stem prefix ('03_naive')."""
    chosen = []
    for name in only:
        stem = name.strip().removesuffix(".ipynb")
        match = [nb for nb in found if nb.stem == stem or nb.stem.startswith(stem)] if stem else []
        if not match:
            said = name if name.strip() else repr(name)
            raise BadInput(f"--only {said:.80}: no such notebook; give a number or a name of one of "
                           f"{', '.join(nb.stem for nb in found)}")
        chosen += [nb for nb in match if nb not in chosen]
    return sorted(chosen)


def run_batch(profile: str | None = None, out: str | Path = "batch-runs", overrides: Mapping[str, Any] | None = None,
              only: list[str] | None = None, notebooks_dir: str | Path | None = None,
              profiles: Mapping[str, dict] | None = None, show_code: bool = False, self_contained: bool = False,
              log: Callable[[str], None] = print) -> BatchReport:
    """Execute the notebooks of a profile into `out/<timestamp>/` with HTML reports and an index.html (with
    `self_contained`, each report holds plotly.js itself and the folder no plotly.min.js)."""
    profiles = profiles if profiles is not None else load_profiles()
    profile = default_profile() if profile is None else profile
    out = paths.check_folder(out, "batch folder (--out)", write=True)
    notebooks = (default_notebooks_dir() if notebooks_dir is None
                 else paths.check_folder(notebooks_dir, "notebooks folder (--notebooks)", exists=True))
    planned = plan(profile, profiles, notebooks, overrides, only)
    folder = _new_folder(out)
    started, started_at = time.monotonic(), time.strftime("%Y-%m-%d %H:%M %Z")
    if not self_contained:
        copy_plotly_js(folder)
    timeout = profiles[profile].get("cell_timeout_s")
    log(f"batch profile {profile}: {len(planned)} notebooks into {folder}")
    outcomes: list[NotebookOutcome] = []
    try:
        with supervise.sigterm_as_interrupt():  # SIGTERM ends it as Ctrl-C does: the index still written
            pages = [f"{notebook.stem}.html" for notebook, _ in planned]
            for i, (notebook, params) in enumerate(planned, 1):
                outcome = execute(notebook, params, folder, cell_timeout_s=timeout, show_code=show_code,
                                  self_contained=self_contained, neighbours=(pages[i - 2] if i > 1 else None,
                                                                             pages[i] if i < len(pages) else None))
                outcomes.append(outcome)
                detail = f"{where(outcome)}: {outcome.error}" if outcome.error else f"{outcome.html}, " \
                    f"{outcome.html_bytes / 1e6:.2f} MB" + "".join(f"; warning: {w}" for w in outcome.warnings)
                log(f"[{i}/{len(planned)}] {notebook.stem}: {outcome.status} in {outcome.seconds:.0f} s ({detail})")
    except KeyboardInterrupt as stop:
        _stop_kernels()
        outcomes += [NotebookOutcome(nb.stem, INTERRUPTED if n == 0 else NOT_RUN, 0.0, nb.name, None, params,
                                     error=f"{stop or 'Ctrl-C'}: the batch stopped" if n == 0 else None)
                     for n, (nb, params) in enumerate(planned[len(outcomes):])]
        report = BatchReport(profile, folder, outcomes, started_at, time.monotonic() - started, *describe_machine())
        write_record(report)
        log(f"batch interrupted: {', '.join(f'{o.name} {o.status}' for o in outcomes)}; open {folder / 'index.html'}")
        raise
    report = BatchReport(profile, folder, outcomes, started_at, time.monotonic() - started, *describe_machine())
    write_record(report)
    log(f"{len(outcomes) - len(report.failed)} of {len(outcomes)} notebooks ok in {report.seconds:.0f} s; "
        f"open {folder / 'index.html'}")
    return report


def _stop_kernels() -> None:
    """After an interrupt: the kernels this process started (in sessions of their own) killed, and their unix
    socket files removed. The batch ends with its one line: asyncio's report of the killed kernel's
    pending cell ("Task exception was never retrieved", DeadKernelError, when the process tears down) is not shown."""
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "ipykernel" in " ".join(child.cmdline()):
                child.kill()
                child.wait(5)
    _remove_sockets()


_SOCKET_FOLDERS: list[Path] = []  # the private folders of this process's kernels' unix sockets


def _socket_folder() -> Path:
    """A private folder (mode 700) for one kernel's unix sockets: never the batch folder, where a batch killed
    outright (SIGKILL: no clean-up runs) would leave them among the pages users browse."""
    folder = Path(tempfile.mkdtemp(prefix="colloc-kit-kernel-"))
    _SOCKET_FOLDERS.append(folder)
    return folder


def _remove_sockets() -> None:
    """The socket folders of this process's kernels, with whatever a stopped kernel left in them."""
    while _SOCKET_FOLDERS:
        shutil.rmtree(_SOCKET_FOLDERS.pop(), ignore_errors=True)


def describe_machine() -> tuple[str, str]:
    """(host, GPUs) for the index: 'vm: Intel Xeon, 2 cores', 'NVIDIA H100 80GB HBM3' or 'none (why)'."""
    info = machine.describe()
    host = info["host"]
    gpus = ", ".join(g["name"] for g in info["gpus"]) or f"none ({info.get('gpu_reason') or 'no NVIDIA GPU'})"
    return f"{host['hostname']}: {host['cpu']}, {host['logical_cores']} cores", gpus


def copy_plotly_js(folder: Path) -> Path:
    """The one plotly.js every report of the batch folder references (plotly ships it in its package)."""
    return Path(shutil.copyfile(plotly_js(), folder / PLOTLY_JS))


def execute(notebook: Path, parameters: dict, folder: Path, cell_timeout_s: float | None = None,
            show_code: bool = False, self_contained: bool = False,
            neighbours: tuple[str | None, str | None] = (None, None)) -> NotebookOutcome:
    """Run one notebook with papermill in a kernel of this Python, then export it to HTML (failed ones too)."""
    deferred_iri.defer()  # papermill imports nbformat, and with it jsonschema
    import papermill  # noqa: PLC0415 - notebook execution, loaded when a batch runs

    output = folder / notebook.name
    started = time.monotonic()
    error = error_cell = error_source = None
    try:
        papermill.execute_notebook(str(notebook), str(output), parameters=parameters, kernel_name="python3",
                                   kernel_manager_class=current_python_kernel_manager(folder), progress_bar=False,
                                   cwd=str(folder), execution_timeout=cell_timeout_s, start_timeout=120)
    except papermill.PapermillExecutionError as exc:
        error, error_cell = f"{exc.ename}: {exc.evalue}", exc.exec_count
        error_source = "\n".join(exc.source.splitlines()[:3])
    except Exception as exc:  # a dead kernel or a cell timeout must not stop the other notebooks
        error = f"{type(exc).__name__}: {exc}"
    _remove_sockets()  # its kernel is gone (an interrupt: `_stop_kernels` stops it first)
    seconds = time.monotonic() - started
    shown = {k: v for k, v in parameters.items() if k not in BATCH_PARAMETERS}
    page = export_html(output, shown, show_code, self_contained, neighbours, error) if output.exists() else None
    return NotebookOutcome(name=notebook.stem, status=FAILED if error else OK, seconds=seconds, ipynb=output.name,
                           html=page.name if page else None, parameters=parameters, error=error, error_cell=error_cell,
                           error_source=error_source, warnings=warnings_of(output) if output.exists() else [],
                           html_bytes=page.stat().st_size if page else 0,
                           summary=summary_of(output) if output.exists() else "",
                           flags=flags_of(output) if output.exists() else {})


def current_python_kernel_manager(log_folder: Path | None = None) -> type:
    """A kernel manager class whose only kernelspec is ipykernel's own for sys.executable (never a stale install),
    talking to the kernel over unix sockets in a private folder of their own (`_socket_folder`); with `log_folder` (a
    batch's folder) the kernels' own stderr goes to its `KERNEL_LOG` (a batch stopped mid-cell: ZMQ's complaints),
    never to the batch's terminal."""
    from jupyter_client.kernelspec import (  # noqa: PLC0415 - notebook execution, loaded when a batch runs
        KernelSpecManager,
    )
    from jupyter_client.manager import (  # noqa: PLC0415 - notebook execution, loaded when a batch runs
        AsyncKernelManager,
    )
    from traitlets import default  # noqa: PLC0415 - notebook execution, loaded when a batch runs

    class CurrentPythonKernelManager(AsyncKernelManager):
        @default("transport")
        def _local_sockets(self) -> str:
            return "ipc"  # unix sockets only this user can open, not unencrypted TCP on localhost

        @default("ip")
        def _private_sockets(self) -> str:  # the ipc transport's socket path prefix (its default: in the cwd)
            return str(_socket_folder() / "kernel-ipc")

        @default("kernel_spec_manager")
        def _only_this_python(self) -> KernelSpecManager:
            return KernelSpecManager(kernel_dirs=[], ensure_native_kernel=True)

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            with open(log_folder / KERNEL_LOG, "ab") if log_folder else contextlib.nullcontext() as log:
                kw.setdefault("stderr", log)  # papermill runs the kernel in the folder by chdir, not by its `cwd`
                await super()._async_launch_kernel(kernel_cmd, **kw)

    return CurrentPythonKernelManager


def _new_folder(out: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = out / stamp
    n = 1
    while folder.exists():
        n += 1
        folder = out / f"{stamp}-{n}"
    folder.mkdir(parents=True)
    return folder
