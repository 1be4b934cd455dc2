"""A stand-in for what `colloc_kit.run` returns, for tests of the panel and the figures: Results whose jobs and
runs frames have the columns analysis reads, with rates made up (not measured)."""

from __future__ import annotations

import pandas as pd

from colloc_kit.analysis.results import Results


def job_rows(run_id: str, mode: str, copies: int, rates: list[float], model: str = "smallcnn", batch_size: int = 8,
             status: str = "complete", error: str | None = None) -> list[dict]:
    """One run's jobs; the first gets `status` and `error`, the others complete."""
    return [{"run_id": run_id, "experiment": "t", "mode": mode, "mode_label": mode, "copies": copies, "repeat": 0,
             "sequential": mode == "exclusive", "alone": copies == 1, "job": f"j{i}", "slot_label": f"s{i}",
             "model": model, "dataset": "synthetic", "data_root": None, "image_size": 32, "batch_size": batch_size,
             "amp": "off", "recipe": "kit", "device": "cpu",
             "status": status if i == 0 else "complete", "error": error if i == 0 else None, "images_per_s": rate,
             "images_per_s_overlap": None if copies == 1 else rate, "epoch_time_s": None, "step_time_s": 0.1,
             "steady_s": 5.0, "peak_memory_mb": 100.0, "sm_util_pct_mean": 50.0}
            for i, rate in enumerate(rates)]


def fake_results(rows: list[dict]) -> Results:
    jobs = pd.DataFrame(rows)
    keys = ["run_id", "experiment", "mode", "mode_label", "copies", "repeat"]
    runs = jobs.groupby(keys, sort=False)["images_per_s"].sum().rename("aggregate_images_per_s").reset_index()
    runs = runs.assign(aggregate_images_per_s_ci=0.0, flags=None, bound_by=None,
                       n_jobs=jobs.groupby("run_id", sort=False).size().values)
    return Results(jobs=jobs, epochs=pd.DataFrame(), runs=runs)
