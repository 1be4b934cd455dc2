"""The notebooks' interactive panel: choose models, mode, copies, batch size and limits, press Run, watch the figure.

    >>> panel = ExperimentPanel(models=["resnet18", "resnet50"], modes=["naive", "mps"],
    ...                         job={"device": "cuda", "amp": "bf16", "steps": 60})     # doctest: +SKIP
    >>> panel            # the last expression of a cell shows the panel                # doctest: +SKIP

Each Run runs one copy count after another (`colloc_kit.run`, or the `run_fn` given), keeps every result in
`panel.jobs`, and redraws the plotly FigureWidget after each, so the curve grows while the experiment runs.
Bad input is shown in the panel's status line; nothing starts.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import ipywidgets as w
import pandas as pd
import plotly.graph_objects as go

from . import analysis, plots
from .results import Results, combine
from .errors import CollocKitError
from .spec import ModeSpec, with_changes

COPY_CHOICES = (1, 2, 3, 4, 5, 6, 7, 8)


class ExperimentPanel:
    """An ipywidgets panel around `colloc_kit.run`.

    `job`: JobSpec fields every job gets (device, amp, dataset, image size, ...); `modes`: names or dicts such as
    {"name": "mps", "partitions": ["3g", "2g", "1g", "1g"]}; `figure`: draws the panel's summary frame
    (`analysis.summarize` of every job so far); `run_fn`: what runs the jobs (default `colloc_kit.run`).
    """

    def __init__(self, models: Sequence[str], modes: Sequence[Any] = ("naive",), copies: Sequence[int] = (1, 2, 4),
                 batch_sizes: Sequence[int] = (32, 64, 128), job: dict | None = None, out: str = "runs",
                 name: str = "panel", time_limit_s: float = 600.0,
                 figure: Callable[[pd.DataFrame], go.Figure] = plots.throughput_vs_copies,
                 run_fn: Callable[..., Any] | None = None):
        self.job = dict(job or {})
        self.out, self.name, self.figure_fn = out, name, figure
        self.run_fn = run_fn
        self.results = Results(jobs=pd.DataFrame(), epochs=pd.DataFrame(), runs=pd.DataFrame())
        modes = [ModeSpec.parse(m) for m in modes]
        self.models = w.SelectMultiple(options=list(models), value=(models[0],), description="models", rows=min(6, len(models)))
        self.mode = w.Dropdown(options=[(m.label, m) for m in modes], description="mode")
        self.copies = w.SelectMultiple(options=sorted(set(COPY_CHOICES) | set(copies)), value=tuple(copies),
                                       description="copies", rows=4)
        self.batch_size = w.Dropdown(options=list(batch_sizes), value=self.job.get("batch_size", batch_sizes[0])
                                     if self.job.get("batch_size") in batch_sizes else batch_sizes[0], description="batch size")
        self.steps = w.BoundedIntText(value=self.job.get("steps") or 60, min=self.job.get("warmup_steps", 10) + 1,
                                      max=100_000, description="steps")
        self.time_limit = w.BoundedFloatText(value=time_limit_s, min=1, max=86_400, description="limit (s)")
        self.button = w.Button(description="Run", button_style="primary", icon="play")
        self.progress = w.IntProgress(value=0, min=0, max=1, description="runs")
        self.status = w.HTML("Choose, then press Run.")
        self.log = w.Output()
        self.figure = go.FigureWidget(plots.empty("Results", "press Run to measure"))
        self.button.on_click(self.run)
        controls = w.VBox([self.models, self.mode, self.copies, self.batch_size, self.steps, self.time_limit,
                           w.HBox([self.button, self.progress]), self.status])
        self.widget = w.VBox([w.HBox([controls, self.log]), self.figure])

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        return self.widget._repr_mimebundle_(**kwargs)

    def chosen_jobs(self) -> list[dict]:
        """The job groups the controls describe: one per chosen model."""
        return [with_changes(self.job, {"model": model, "batch_size": self.batch_size.value, "steps": self.steps.value})
                for model in self.models.value]

    def run(self, _button: Any = None) -> None:
        """The Run button: one run per chosen copy count, the figure redrawn after each."""
        run_fn = self.run_fn or _default_run()
        copies = sorted(self.copies.value)
        self.button.disabled = True
        self.progress.max, self.progress.value = len(copies), 0
        try:
            with self.log:
                for n in copies:
                    self.status.value = f"running {self.mode.label} with {n} cop{'y' if n == 1 else 'ies'}..."
                    results = run_fn(self.chosen_jobs(), mode=self.mode.value, copies=n, out=self.out, name=self.name,
                                     time_limit_s=self.time_limit.value, progress=True)
                    self.add(results)
                    self.progress.value += 1
            failed = int((self.jobs["status"] != analysis.COMPLETE).sum()) if len(self.jobs) else 0
            self.status.value = f"done: {len(self.jobs)} jobs measured" + (f", {failed} did not complete" if failed else "")
        except CollocKitError as exc:
            self.status.value = f"<b>not run</b>: {_escape(exc)}"
        except KeyboardInterrupt:
            self.status.value = "interrupted: what was measured is kept"
        finally:
            self.button.disabled = False

    @property
    def jobs(self) -> pd.DataFrame:
        """Every job measured so far (one row per job per run)."""
        return self.results.jobs

    def add(self, results: Results) -> None:
        """Keep more results and redraw the figure from all of them."""
        self.results = combine([self.results, results])
        drawn = self.figure_fn(analysis.summarize(self.results))
        with self.figure.batch_update():
            self.figure.data = ()
            self.figure.add_traces(drawn.data)
            self.figure.layout = drawn.layout


def _default_run() -> Callable[..., Any]:
    from .experiment import run

    return run


def _escape(value: Any) -> str:
    import html

    return html.escape(str(value))
