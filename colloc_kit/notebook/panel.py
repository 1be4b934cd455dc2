"""The notebooks' interactive panel: choose models, mode, copies, batch size and limits, press Run, watch the figure.

    >>> panel = ExperimentPanel(models=["resnet18"], more_models=["resnet50"], modes=["naive", "mps"],
    ...                         copies=[1, 2, 4], job={"device": "cuda", "amp": "bf16", "steps": 60})   # doctest: +SKIP
    >>> panel            # the last expression of a cell shows the panel                              # doctest: +SKIP

A notebook's panel cell is one call, `panel(INTERACTIVE, setup, ...)`: the panel where INTERACTIVE is True, else a
line saying how to turn it on (papermill batches keep INTERACTIVE False).

The panel starts from the notebook's own choices (its models preselected and listed first, then `more_models`; its
modes that run here, then every other registered mode that runs here without options; copies and batch size); a
notebook's mode that cannot run here (MPS on a CPU) is not offered, and the status line says why. On a CPU the
GPU's live panels are left out. The copy counts are toggles, every one in sight; where a gain needs the lone job (1
copy) and it was not chosen nor measured yet, Run measures it first and says so. Run measures one
copy count after another, each a new repeat however often it is pressed (`colloc_kit.run(..., again=True)`, or the
`run_fn` given)
in a background thread, keeps every result (`panel.results`, `panel.jobs`, `panel.summary`) and redraws the figure
after each. While a run goes on, live figures draw each job's images/s as the jobs report it and the GPU's SM
activity, memory and power as the monitor samples it (about once a second); `panel.live_history()` and
`panel.live_gpu_history()` keep every reading of every run. Stop, or
Kernel > Interrupt, stops the jobs within seconds; what was measured is kept on disk, marked interrupted. Every
outcome is one line in the status line: bad input in Python terms, the reason of each job that did not complete, a
warning when identical jobs differ too much to compare (a busy CPU); the progress bar turns red on failure.
"""

from __future__ import annotations

import functools
import html
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Sequence

import ipywidgets as w
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from colloc_kit.analysis import summaries as analysis
from colloc_kit.analysis.results import Results, combine
from colloc_kit.errors import CollocKitError
from colloc_kit.notebook import background
from colloc_kit.notebook.offered import mode_choices, not_offered
from colloc_kit.notebook import setup as notebook
from colloc_kit.notebook.toggles import CopyToggles
from colloc_kit.paths import absolute
from colloc_kit.pipeline import run
from colloc_kit.pipeline.lane import shared_zygote
from colloc_kit.pipeline.progress import Progress
from colloc_kit.spec import ModeSpec, with_changes
from colloc_kit.views import plots
from colloc_kit.worker.models import MODEL_NAMES

__all__ = ["BATCH_SIZE_CHOICES", "COPY_CHOICES", "ExperimentPanel", "LIVE_REDRAW_S", "OFF_NOTICE", "PLACEHOLDER",
           "RELOAD_NOTICE", "SHOWN_REASONS", "panel"]

COPY_CHOICES = (1, 2, 3, 4, 5, 6, 7, 8)
BATCH_SIZE_CHOICES = (8, 16, 32, 64, 128, 256)
OFF_NOTICE = ("INTERACTIVE = False: the panel is off. "
              "Set INTERACTIVE = True in the parameters cell to try your own settings.")
PLACEHOLDER = "press Run to measure"
RELOAD_NOTICE = ("The experiment panel shows here while its kernel runs. If you read this line instead (the page was "
                 "reloaded or the kernel restarted), run this cell again: its runs are kept under {folder}.")
SHOWN_REASONS = 3  # failed jobs named in the status line; the rest are counted
LIVE_REDRAW_S = 1.0  # the live figure is redrawn at most this often


class ExperimentPanel:
    """An ipywidgets panel around `colloc_kit.run`.

    `models`: the notebook's models (preselected); `more_models`: offered below them; `job`: JobSpec fields every
    job gets (device, amp, dataset, batch size, steps, ...); `modes`: names or dicts such as
    {"name": "mps", "partitions": ["3g", "2g", "1g", "1g"]}, the first preselected; `figure`: draws the panel's
    summary frame (`analysis.summarize` of every job so far); `run_fn`: what runs the jobs (default `colloc_kit.run`).
    """

    def __init__(self, models: Sequence[str], modes: Sequence[Any] = ("naive",), copies: Sequence[int] = (1, 2, 4),
                 batch_sizes: Sequence[int] = (32, 64, 128), job: dict | None = None, out: str | Path = "runs",
                 name: str = "panel", time_limit_s: float = 600.0, more_models: Sequence[str] = (),
                 figure: Callable[[pd.DataFrame], go.Figure] = plots.throughput_vs_copies,
                 run_fn: Callable[..., Any] | None = None):
        self.job = dict(job or {})
        self.out, self.name, self.figure_fn, self.run_fn = absolute(out), name, figure, run_fn  # as it was made
        self.results = combine([])  # every run measured so far
        self.summary = pd.DataFrame()
        self.task: background.Background | None = None
        options = list(dict.fromkeys([*models, *sorted(set(more_models) - set(models))]))
        self.models = w.SelectMultiple(options=options, value=tuple(models), description="models",
                                       rows=min(6, max(2, len(options))))
        device = self.job.get("device", "cuda")
        self.mode = w.Dropdown(options=[(m.label, m) for m in mode_choices(modes, device)], description="mode")
        self.not_offered = not_offered(modes, device)  # the notebook's modes that cannot run here, with why
        self.copies = CopyToggles(sorted(set(COPY_CHOICES) | set(copies)), chosen=copies)
        batch = self.job.get("batch_size") or batch_sizes[0]
        self.batch_size = w.Dropdown(options=sorted(set(batch_sizes) | {batch}), value=batch, description="batch size")
        self.steps = w.BoundedIntText(value=self.job.get("steps") or 60, min=self.job.get("warmup_steps", 10) + 1,
                                      max=100_000, description="steps")
        self.time_limit = w.BoundedFloatText(value=time_limit_s, min=1, max=86_400, description="limit (s)")
        self.button = w.Button(description="Run", button_style="primary", icon="play")
        self.stop_button = w.Button(description="Stop", button_style="warning", icon="stop", disabled=True)
        self.progress = w.IntProgress(value=0, min=0, max=1, description="runs")
        self.status = w.HTML("Choose, then press Run." + "".join(
            f"<br>{html.escape(m)} is not offered here: {html.escape(why)}" for m, why in self.not_offered.items()))
        self.log = w.Output()
        self.figure: w.DOMWidget = w.HTML(f"<i>Results: {PLACEHOLDER}</i>")  # a figure from the first result on
        self.readings: list[dict] = []  # every job's images/s as reported, every run
        self.live = go.FigureWidget(layout={"title": "Live: images/s of each job of the current run",
                                            "template": plots.TEMPLATE, "height": 300, "xaxis_title": "seconds",
                                            "yaxis": {"title": "images/s", "rangemode": "tozero"}})
        self._live_lock, self._live_drawn_at = threading.Lock(), 0.0
        self.gpu_readings: list[dict] = []  # every sample of the run's GPU, every run
        self.live_gpu = go.FigureWidget(_gpu_panels())
        self.lone_added = False  # Run added the lone job (1 copy) that a gain needs
        self.runs_started = 0  # each run of the panel draws its own live lines, even where two runs share a label
        self.presses, self.this_run = 0, combine([])  # Run presses, and what the latest one measured
        self._gpu_drawn_at = 0.0
        self.button.on_click(self.run)
        self.stop_button.on_click(self.stop)
        controls = w.VBox([self.models, self.mode, self.copies.widget, self.batch_size, self.steps, self.time_limit,
                           w.HBox([self.button, self.stop_button, self.progress]), self.status])
        live = [self.live, self.live_gpu] if device != "cpu" else [self.live]  # a CPU run has no GPU to draw
        self.widget = w.VBox([w.HBox([controls, self.log]), *live, self.figure])  # results last
        background.route_kernel_interrupts()  # Kernel > Interrupt stops a run of this panel

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        """The panel; where a page reloaded without its kernel's widgets, the line that says what to do instead."""
        return {**self.widget._repr_mimebundle_(**kwargs), "text/plain": RELOAD_NOTICE.format(
            folder=f"{self.out}/{self.name}")}

    def chosen_jobs(self) -> list[dict]:
        """The job groups the controls describe: one per chosen model."""
        return [with_changes(self.job, {"model": model, "batch_size": self.batch_size.value, "steps": self.steps.value})
                for model in self.models.value]

    def problem(self) -> str | None:
        """What must be chosen before Run can start, or None."""
        if not self.models.value:
            return "choose at least one model in the models list"
        if not self.copies.value:
            return "choose at least one copy count in the copies list"
        return None

    def run(self, _button: Any = None) -> None:
        """The Run button: one run per chosen copy count in a background thread, the figure redrawn after each."""
        if self.task is not None and self.task.running:
            return
        problem = self.problem()
        if problem:
            self._finish(f"<b>not run</b>: {html.escape(problem)}", "danger")
            return
        copies, jobs = sorted(self.copies.value), self.chosen_jobs()
        mode, limit = self.mode.value, self.time_limit.value
        self.lone_added = 1 not in copies and not self._has_lone(jobs, mode)
        copies = [1, *copies] if self.lone_added else copies
        self.button.disabled, self.stop_button.disabled = True, False
        self.progress.max, self.progress.value, self.progress.bar_style = len(copies), 0, "info"
        self.log.clear_output()
        self.presses, self.this_run = self.presses + 1, combine([])
        self.task = background.Background(lambda: self._measure(jobs, mode, copies, limit), self._done).start()

    def _has_lone(self, jobs: list[dict], mode: ModeSpec) -> bool:
        """Whether this panel has measured the lone job (1 copy) of these jobs under `mode`: a gain is judged
        against it."""
        if not len(self.jobs):
            return False
        lone = self.jobs[(self.jobs["copies"] == 1) & (self.jobs["mode"] == mode.name)]
        return all(((lone["model"] == j["model"]) & (lone["batch_size"] == j["batch_size"])).any() for j in jobs)

    def stop(self, _button: Any = None) -> None:
        """The Stop button: stop the jobs now; what was measured is kept, marked interrupted."""
        if self.task is not None:
            self.status.value = "stopping..."
            self.task.stop()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the current run to end; True if none is running."""
        return self.task is None or self.task.join(timeout)

    @shared_zygote()  # each call a block in the Run's thread: its copy counts' runs import torch once for them all
    def _measure(self, jobs: list[dict], mode: ModeSpec, copies: list[int], limit: float) -> None:
        run_fn = self.run_fn or _default_run()
        for i, n in enumerate(copies, 1):
            self.status.value = (f"running {html.escape(mode.label)} with {n} cop{'y' if n == 1 else 'ies'} "
                                 f"({i} of {len(copies)})...")
            self.runs_started += 1
            self.draw_live()  # the run under way from its start: never the previous run's lines
            results = run_fn(jobs, mode=mode, copies=n, out=self.out, name=self.name, time_limit_s=limit,
                             progress=Progress(total_runs=1, enabled=False, on_rate=self.on_rate, on_gpu=self.on_gpu))
            self.draw_live()
            self.draw_live_gpu()
            earlier = set(self.results.runs.get("run_id", ()))  # `run` returns the experiment's earlier runs too
            self.add(results)
            self.this_run = combine([self.this_run, results.of_runs(set(results.runs.get("run_id", ())) - earlier)])
            self.progress.value += 1

    def _done(self, _result: Any, error: BaseException | None) -> None:
        self.draw_live(ended=True)  # the run that ended, stopped or not, with every reading it had
        if error is None:
            self._finish(*self.verdict())
        elif isinstance(error, KeyboardInterrupt):
            self._finish(f"<b>interrupted</b>: the jobs were stopped; the run is kept under "
                         f"{html.escape(str(self.out / self.name))}, marked interrupted", "warning")
        elif isinstance(error, CollocKitError):
            self._finish(f"<b>not run</b>: {html.escape(notebook.one_line(error))}", "danger")
        else:
            self.log.append_stderr("".join(traceback.format_exception(error)))
            self._finish(f"<b>failed</b>: {html.escape(notebook.one_line(error))} (traceback beside)", "danger")

    def verdict(self) -> tuple[str, str]:
        """The status line and progress-bar style after a run: jobs measured, why any did not complete, noise."""
        measured = self.this_run.jobs
        failed = measured[measured["status"] != analysis.COMPLETE] if len(measured) else measured
        text = f"done: Run {self.presses} measured {notebook.plural(len(measured), 'job')}{_what(measured)}" + (
            " (1 copy added: a gain is measured against the job alone)" if self.lone_added else "")
        if len(failed):
            reasons = [f"{row.job} {row.status}" + (f" ({row.error})" if isinstance(row.error, str) else "")
                       for row in failed.reindex(columns=["job", "status", "error"]).head(SHOWN_REASONS).itertuples()]
            more = f"; {len(failed) - SHOWN_REASONS} more" if len(failed) > SHOWN_REASONS else ""
            text += f", <b>{len(failed)} did not complete</b>: {html.escape('; '.join(reasons) + more)}"
        noise = notebook.noise_warning(self.jobs, self.summary) if len(self.jobs) else None
        if noise:
            text += f"<br><b>warning</b>: {html.escape(noise)}"
        return text, "danger" if len(failed) else "warning" if noise else "success"

    def _finish(self, status: str, style: str) -> None:
        self.progress.bar_style = style  # before the line a reader (or a test) waits for
        self.status.value = status
        self.button.disabled, self.stop_button.disabled = False, True

    def on_rate(self, run: str, job: str, t: float, images_per_s: float) -> None:
        """A job's throughput as measured (from the launcher's event threads): kept, and drawn once a second."""
        with self._live_lock:
            self.readings.append({"run": f"{run} (the panel's run {self.runs_started})", "job": job, "t": t,
                                  "images_per_s": images_per_s})
            due = time.monotonic() - self._live_drawn_at >= LIVE_REDRAW_S
        if due:
            self.draw_live()

    def on_gpu(self, run: str, sample: dict) -> None:
        """A sample of the run's GPU (from the monitor's thread): SM activity, memory and power kept, drawn once a
        second. SM activity is GPM's where the GPU has it, else NVML's utilization (a kernel was running)."""
        sm = sample.get("sm_util_pct")
        with self._live_lock:
            self.gpu_readings.append({
                "run": f"{run} (the panel's run {self.runs_started})", "t": sample["t"],
                "sm_active_pct": sample.get("gpu_util_pct") if sm is None else sm,
                "mem_used_mb": sample.get("mem_used_mb"), "power_w": sample.get("power_w")})
            due = time.monotonic() - self._gpu_drawn_at >= LIVE_REDRAW_S
            if due:
                self._gpu_drawn_at = time.monotonic()
        if due:
            self.draw_live_gpu()

    def live_gpu_history(self) -> pd.DataFrame:
        """Every GPU sample of every run so far: run, t (epoch seconds), sm_active_pct, mem_used_mb, power_w."""
        with self._live_lock:
            return pd.DataFrame(self.gpu_readings, columns=["run", "t", "sm_active_pct", "mem_used_mb", "power_w"])

    def draw_live_gpu(self) -> None:
        """The current run's GPU samples: SM activity, memory and power against seconds from its first sample."""
        history = self.live_gpu_history()
        current = history[history["run"] == history["run"].iloc[-1]] if len(history) else history
        seconds = current["t"] - current["t"].min()
        with self.live_gpu.batch_update():
            for trace, column, scale in zip(self.live_gpu.data, ("sm_active_pct", "mem_used_mb", "power_w"),
                                            (1, 1 / 1024, 1)):
                trace.x, trace.y = seconds, current[column].astype(float) * scale

    def live_history(self) -> pd.DataFrame:
        """Every throughput reading of every run so far: run, job, t (epoch seconds), images_per_s."""
        with self._live_lock:
            return pd.DataFrame(self.readings, columns=["run", "job", "t", "images_per_s"])

    def draw_live(self, ended: bool = False) -> None:
        """The current run's readings, one line per job, seconds from its first reading; `ended`: the run is over
        (done or stopped), so one without readings is not said to wait for them."""
        history = self.live_history()
        with self._live_lock:
            self._live_drawn_at = time.monotonic()
            mark = f"(the panel's run {self.runs_started})"
            current = history[history["run"].str.endswith(mark)] if len(history) else history
            with self.live.batch_update():
                self.live.data = ()
                for job, rows in current.groupby("job", sort=True):
                    self.live.add_scatter(x=rows["t"] - current["t"].min(), y=rows["images_per_s"], name=job,
                                          mode="lines+markers")
                self.live.layout.title.text = f"Live: images/s of each job of {current['run'].iloc[-1]}" \
                    if len(current) else f"Live: the panel's run {self.runs_started}, " + (
                        "ended before its first reading" if ended else "waiting for its first reading")

    @property
    def jobs(self) -> pd.DataFrame:
        """Every job measured so far (one row per job per run)."""
        return self.results.jobs

    def add(self, results: Results) -> None:
        """Keep one more run's results and redraw the figure from all of them (the placeholder goes; greyed, "not a
        result", where the noise check fires)."""
        self.results = combine([self.results, results])
        self.summary = analysis.summarize(self.results)
        drawn = plots.noisy(self.figure_fn(self.summary), notebook.noise_warning(self.jobs, self.summary))
        # a new figure widget each time: plotly.js merges a new layout into the old one, which kept the placeholder
        previous, self.figure = self.figure, go.FigureWidget(drawn)
        self.widget.children = (*self.widget.children[:-1], self.figure)
        previous.close()


def _what(jobs: pd.DataFrame) -> str:
    """What one Run measured, for its status line: ' as repeat 2 of naive x1, x2, x7'."""
    if not len(jobs):
        return ""
    repeats = sorted({int(r) + 1 for r in jobs["repeat"].dropna()}) if "repeat" in jobs else []
    label = ", ".join(dict.fromkeys(jobs["mode_label"].astype(str)))
    copies = ", ".join(f"x{c}" for c in sorted(jobs["copies"].unique()))
    return (f" as repeat {', '.join(map(str, repeats))}" if repeats else "") + f" of {label} {copies}"


def panel(interactive: bool, setup: notebook.Setup, modes: Sequence[Any], copies: Sequence[int], batch_size: int,
          name: str, out: str = "runs", time_limit_s: float = 600.0) -> ExperimentPanel | None:
    """A notebook's panel cell: with `interactive` the panel for `setup`'s jobs (its models first, every model the
    kit knows below them unless the setup is the tiny CPU one), else None after printing OFF_NOTICE.

    >>> setup = notebook.Setup("cpu", ["smallcnn"], {"device": "cpu", "steps": 40}, tiny=True, gpu=False)
    >>> panel(False, setup, modes=["naive"], copies=[1, 2], batch_size=16, name="demo-panel")
    INTERACTIVE = False: the panel is off. Set INTERACTIVE = True in the parameters cell to try your own settings.
    >>> panel(True, setup, modes=["naive"], copies=[1, 2], batch_size=16, name="demo-panel")   # doctest: +SKIP
    """
    if not interactive:
        print(OFF_NOTICE)
        return None
    return ExperimentPanel(models=setup.models, more_models=[] if setup.tiny else MODEL_NAMES, modes=modes,
                           copies=copies, batch_sizes=BATCH_SIZE_CHOICES, job={"batch_size": batch_size, **setup.job},
                           out=out, name=name, time_limit_s=time_limit_s)


def _gpu_panels() -> go.Figure:
    """Three empty live panels of the run's GPU, side by side: SM activity, memory, power."""
    fig = make_subplots(rows=1, cols=3, subplot_titles=("SM activity (%)", "memory used (GB)", "power (W)"))
    for col, name in enumerate(("SM activity", "memory", "power"), 1):
        fig.add_scatter(x=[], y=[], mode="lines", name=name, showlegend=False, row=1, col=col)
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(title="Live: the GPU of the current run (none on a CPU run)", template=plots.TEMPLATE,
                      height=260, margin={"t": 70})
    return fig


def _default_run() -> Callable[..., Any]:
    return functools.partial(run, again=True)  # every Run measures: a new repeat of a cell measured before
