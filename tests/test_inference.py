"""Issue 42: an inference job beside training. Its latency figures from known arrival and service times, a starved
inference job (its p99 grows and the run names it), bad input refused with exit 2 before anything starts, and one
real CPU cell with an inference job read back by `load`."""

import json
import math
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

import colloc_kit
from colloc_kit.analysis import latency
from colloc_kit.cli import advise_serve
from colloc_kit.cli.main import main
from colloc_kit.errors import BadInput
from colloc_kit.modes.registry import validate_mode_spec
from colloc_kit.notebook import fits
from colloc_kit.predict import serve_advise
from colloc_kit.serving import slo_ms
from colloc_kit.spec import JobSpec, ModeSpec
from colloc_kit.views.frontier import safe_share
from colloc_kit.views.style import setting_words, short_label
from colloc_kit.worker.serve import Arrivals, FakeClock, Server


def served(arrivals: Arrivals, service_s: float, max_batch: int = 1, delay_s: float = 0.0, until: float = 10.0):
    """(arrival, done) of every request served on a fake clock, each batch taking `service_s` per request."""
    clock = FakeClock()
    server = Server(arrivals, max_batch=max_batch, max_delay_s=delay_s, clock=clock)
    pairs = []
    while clock.now() < until:
        got = server.serve_once(lambda n: clock.advance(service_s * n), give_up=lambda: clock.now() >= until)
        if not got:
            break
        pairs += got
    return pairs, server


def stream_of(pairs, end_t: float, unserved=()):
    return [{"type": "interval", "t": end_t, "interval_s": end_t, "interval_images": len(pairs), "warmup": False,
             "requests": [list(p) for p in pairs]},
            {"type": "end", "t": end_t, "unserved": list(unserved)}]


def test_requests_queue_in_order_and_their_latency_includes_the_wait():
    pairs, _ = served(Arrivals.fixed([0.0, 0.001, 0.002]), service_s=0.005)
    latencies = [round((done - arrival) * 1000, 6) for arrival, done in pairs]
    assert latencies == [5.0, 9.0, 13.0]  # the second waits 4 ms for the first, the third 8 ms


def test_batching_waits_at_most_the_delay_then_serves_together():
    pairs, _ = served(Arrivals.fixed([0.0, 0.001]), service_s=0.004, max_batch=2, delay_s=0.003)
    assert [round(d * 1000, 6) for _, d in pairs] == [9.0, 9.0]  # waited for the 2nd (1 ms), 2 x 4 ms together
    pairs, _ = served(Arrivals.fixed([0.0, 0.010]), service_s=0.004, max_batch=2, delay_s=0.003)
    assert round(pairs[0][1] * 1000, 6) == 7.0  # alone after its 3 ms delay, not held for the late one


def test_closed_loop_keeps_its_clients_busy():
    pairs, _ = served(Arrivals.closed_loop(2), service_s=0.010, until=0.095)
    assert len(pairs) == 10 and all(round(d - a, 6) in (0.01, 0.02) for a, d in pairs)


def test_latency_figures_from_known_latencies():
    pairs = [(i * 0.01, i * 0.01 + (i + 1) / 1000) for i in range(100)]  # latencies 1..100 ms, one every 10 ms
    figures = latency.job_figures(stream_of(pairs, 1.2), (0.0, 1.0), {"role": "serve", "slo": "50.5ms",
                                                                       "rate_per_s": 100.0})
    assert figures["latency_p50_ms"] == pytest.approx(50.0)
    assert figures["latency_p95_ms"] == pytest.approx(95.0)
    assert figures["latency_p99_ms"] == pytest.approx(99.0)
    assert figures["latency_p50_ms_lo"] == pytest.approx(40.0) and figures["latency_p50_ms_hi"] == pytest.approx(60.0)
    assert math.isnan(figures["latency_p99_ms_hi"]) and "requests" in figures["latency_note"]  # too few for p99
    assert figures["slo_share"] == pytest.approx(0.5)
    assert figures["requests_per_s"] == pytest.approx(91.0)  # answered inside the 1-s window: the last 9 after it
    assert figures["answered_share"] == pytest.approx(0.91)  # of the 100 that arrived in it


def test_a_latency_splits_into_queueing_host_and_device_time_and_the_tail_shows_what_a_p99_is_made_of():
    clock = FakeClock()
    server = Server(Arrivals.fixed([0.0, 0.001, 0.5]), max_batch=1, max_delay_s=0.0, clock=clock)
    stream = [{"type": "interval", "requests": [], "request_parts": []}]
    for _ in range(3):  # each request: 10 ms of service, 6 of them on the device
        served = server.serve_once(lambda n: (clock.advance(0.010), 6.0)[1])
        stream[0]["requests"] += [list(pair) for pair in served]
        stream[0]["request_parts"] += [list(server.last_batch)] * len(served)
    figures = latency.job_figures(stream, (0.0, 1.0), {"role": "serve", "device": "cpu", "rate_per_s": 3.0})
    assert figures["device_p50_ms"] == pytest.approx(6.0) and figures["host_p50_ms"] == pytest.approx(4.0)
    assert figures["queue_p50_ms"] == pytest.approx(0.0)  # the 1st and 3rd wait for nothing
    assert figures["latency_p99_ms"] == pytest.approx(19.0)  # the 2nd: 9 ms behind the 1st, then its 10
    assert figures["tail_queue_ms"] == pytest.approx(9.0) and figures["tail_device_ms"] == pytest.approx(6.0)
    assert figures["device_time"] == "cpu forward wall time"


def test_a_request_still_queued_counts_with_its_wait_so_far():
    pairs = [(0.1, 0.105)]
    values = latency.latencies_ms(stream_of(pairs, 2.0, unserved=[0.5]), (0.0, 1.0))
    assert sorted(round(v, 6) for v in values) == [5.0, 1500.0]


def test_a_starved_inference_job_shows_its_p99_grow_and_is_named():
    arrivals = [i / 100 for i in range(300)]  # 100 requests/s for 3 s
    alone, _ = served(Arrivals.fixed(arrivals), service_s=0.002, until=3.0)
    beside, server = served(Arrivals.fixed(arrivals), service_s=0.015, until=3.0)  # slowed 7.5x by training
    spec = {"role": "serve", "slo": "20ms", "rate_per_s": 100.0}
    rows = []
    for run, pairs, unserved in (("alone", alone, []), ("beside", beside, list(server.queue))):
        figures = latency.job_figures(stream_of(pairs, 3.0, unserved), (0.0, 3.0), spec)
        rows.append({"run_id": run, "job": "j0-resnet50", "images_per_s": 1.0, "images_per_s_overlap": None,
                     **figures})
    rows.append({"run_id": "beside", "job": "j1-resnet50", "role": "train", "images_per_s": 300.0,
                 "images_per_s_overlap": 250.0})
    runs = latency.per_run(pd.DataFrame(rows)).set_index("run_id")
    assert rows[1]["latency_p99_ms"] > 20 * rows[0]["latency_p99_ms"]
    assert pd.isna(runs.loc["alone", "serve_starved"])
    assert "j0-resnet50 starved" in runs.loc["beside", "serve_starved"]
    assert "> SLO 20 ms" in runs.loc["beside", "serve_starved"]
    assert "answered 67% of the requests that arrived" in runs.loc["beside", "serve_starved"]  # 15 ms each: 200 of 300
    # a Poisson draw short of the rate offered, every request answered: not starved (246 arrived at 55.1/s for 5 s)
    drawn = [i * 5.0 / 246 for i in range(246)]
    pairs, _ = served(Arrivals.fixed(drawn), service_s=0.002, until=5.0)
    figures = latency.job_figures(stream_of(pairs, 5.0), (0.0, 5.0), {**spec, "rate_per_s": 55.1})
    assert figures["answered_share"] == 1.0
    short = latency.per_run(pd.DataFrame([{"run_id": "r", "job": "j0", "images_per_s": 1.0,
                                           "images_per_s_overlap": None, **figures}]))
    assert pd.isna(short["serve_starved"].iloc[0])
    assert runs.loc["beside", "train_images_per_s"] == pytest.approx(250.0)


def test_the_lone_p99_gives_the_latency_slowdown():
    jobs = pd.DataFrame([{"experiment": "e", "model": "m", "batch_size": 1, "image_size": 32, "amp": "off",
                          "device": "cpu", "rate_per_s": 50.0, "concurrency": None, "max_batch": 1,
                          "max_delay_ms": 0.0, "role": "serve", "alone": alone, "latency_p99_ms": p99}
                         for alone, p99 in ((True, 10.0), (False, 30.0))])
    assert list(latency.with_lone_latency(jobs)["latency_slowdown"]) == [1.0, 3.0]


@pytest.mark.parametrize("options, words", [
    (["--rate-per-s", "0"], "rate_per_s must be above zero"),
    (["--rate-per-s", "10", "--slo", "50"], "slo needs units"),
    (["--concurrency", "2", "--max-batch", "4"], "larger than the request queue allows"),
    ([], "needs one of rate_per_s"),
])
def test_bad_serving_input_exits_2_before_anything_starts(tmp_path, capsys, options, words):
    code = main(["run", "--model", "smallcnn", "--device", "cpu", "--role", "serve", *options, "--out",
                 str(tmp_path / "runs")])
    assert code == 2 and words in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_slo_text_needs_units_and_serving_options_need_role_serve():
    assert slo_ms("2 s") == 2000.0
    with pytest.raises(BadInput, match="units"):
        slo_ms(50)
    with pytest.raises(BadInput, match="role: serve"):
        JobSpec(model="smallcnn", rate_per_s=10.0)


@pytest.mark.slow
def test_an_inference_job_beside_training_on_the_cpu(tmp_path):
    serve = {"model": "smallcnn", "role": "serve", "device": "cpu", "batch_size": 1, "image_size": 32,
             "rate_per_s": 20.0, "slo": "500ms", "seconds": 2, "warmup_steps": 2, "interval_s": 0.5, "max_batch": 3,
             "max_delay_ms": 1.0}
    train = {"model": "smallcnn", "device": "cpu", "batch_size": 16, "image_size": 32, "seconds": 2,
             "warmup_steps": 2, "workers": 0, "interval_s": 0.5}
    results = colloc_kit.run([serve, train], mode="naive", copies=1, out=tmp_path, name="beside", progress=False,
                             monitor=False)
    jobs = results.jobs.set_index("role")
    assert list(results.jobs["role"]) == ["serve", "train"]  # the serve group once, the training group per copy
    assert jobs.loc["serve", "requests_in_window"] > 0
    assert 0 < jobs.loc["serve", "latency_p50_ms"] <= jobs.loc["serve", "latency_p99_ms"]
    assert jobs.loc["serve", "device_p50_ms"] > 0 and jobs.loc["serve", "queue_p50_ms"] >= 0  # its parts recorded
    parts = [jobs.loc["serve", f"tail_{name}_ms"] for name in latency.PARTS]
    assert sum(parts) >= jobs.loc["serve", "latency_p99_ms"] - 1e-6  # the tail's parts add up to its latencies
    assert results.runs["train_images_per_s"].iloc[0] > 0
    # every batch size the server can form was served once before `ready` (a size's first batch is slow)
    serving = next(Path(results.runs["run_dir"].iloc[0]).glob("jobs/j0-*.events.jsonl"))  # the serve job, listed first
    ready = next(e for e in map(json.loads, serving.read_text().splitlines()) if e["type"] == "ready")
    assert ready["primed_batches"] == [1, 2, 3]


def frontier_table(rows):
    columns = {"served": "resnet50", "rate_per_s": 150.0, "concurrency": None, "slo_ms": 25.0, "mix": "resnet50 x2",
               "mode": "mps", "copies": 2, "latency_p50_ms": 5.0, "latency_p99_ms_lo": None, "latency_p99_ms_hi": None,
               "requests_per_s": 150.0, "slo_share": 1.0, "shared": True, "experiment": "e"}
    table = pd.DataFrame([{**columns, **row} for row in rows], columns=serve_advise.FRONTIER_COLUMNS)
    return table.assign(within_slo=table["latency_p99_ms"] <= table["slo_ms"])


def test_advice_picks_the_most_training_within_the_slo_and_refuses_an_unmeasured_question():
    table = frontier_table([
        {"mode_label": "naive", "train_images_per_s": 900.0, "latency_p99_ms": 80.0, "run_id": "a"},
        {"mode_label": "mps", "train_images_per_s": 800.0, "latency_p99_ms": 30.0, "run_id": "b"},
        {"mode_label": "mps(thread_percentage=100+50)", "train_images_per_s": 600.0, "latency_p99_ms": 12.0,
         "run_id": "c"},
        {"mode_label": "mps(thread_percentage=100+25)", "train_images_per_s": 400.0, "latency_p99_ms": 9.0,
         "run_id": "d"},
        {"mode_label": "exclusive", "train_images_per_s": 1000.0, "latency_p99_ms": 6.0, "run_id": "e",
         "shared": False}])
    advice = serve_advise.choose(table, "resnet50", 150, "25ms", "2 x resnet50")
    assert advice.row["run_id"] == "c" and advice.source == "measured"  # exclusive is not sharing: never chosen
    assert serve_advise.choose(table, "resnet50", 150, "40 ms", "resnet50 x2").row["run_id"] == "b"
    assert serve_advise.choose(table, "resnet50", 150, "5ms", "resnet50 x2").row is None
    with pytest.raises(BadInput, match="no measured run serves resnet50 at 300"):
        serve_advise.choose(table, "resnet50", 300, "25ms", "resnet50 x2")
    figure = safe_share(table)
    points = [t for t in figure.data if t.hoverinfo != "skip"]  # the rest: the legend's keys, no point
    assert len(points) == 4 and {t.name for t in points} == set(map(setting_words, table["mode_label"][:4]))
    assert {t.name for t in figure.data if t.hoverinfo == "skip"} == {t.name for t in points}  # one mix: no shape key
    assert [list(t.marker.symbol) for t in points if t.name == "MPS"] == [["circle-open"]]  # over the SLO: open
    # the SLO is said in the plot's title, never by an annotation on the log axis (plotly puts one at 10**x there)
    assert [a.xref for a in figure.layout.annotations] == ["paper"] and "SLO 25 ms" in figure.layout.annotations[0].text


def test_advise_serve_exits_2_without_units_or_without_data(capsys):
    assert main(["advise", "--serve", "resnet50", "--rate", "150", "--slo", "25", "--beside", "resnet50 x2"]) == 2
    assert "slo needs units" in capsys.readouterr().err
    assert main(["advise", "--serve", "resnet50", "--rate", "0", "--slo", "25ms", "--beside", "resnet50 x2"]) == 2


def test_mps_client_priority_is_normal_or_below_normal():
    validate_mode_spec(ModeSpec("mps", {"client_priority": [0, 1, 1]}), device="cuda")
    with pytest.raises(BadInput, match="client_priority must be a whole number 0-1"):
        validate_mode_spec(ModeSpec("mps", {"client_priority": [0, 2]}), device="cuda")


def test_advice_says_serve_alone_only_where_alone_meets_the_slo():
    table = serve_advise.frontier(colloc_kit.reference.load("h200-inference"))
    shared = table[table["shared"] & (table["served"] == "resnet50") & (table["mix"] == "resnet50 x2")]
    rate = float(shared["rate_per_s"].iloc[0])
    alone = table[(table["served"] == "resnet50") & ~table["shared"] & (table["rate_per_s"] == rate)]["latency_p99_ms"]
    best = shared["latency_p99_ms"].min()
    assert len(shared) == 3 and len(alone) == 1 and alone.mean() < best  # beside two trainers none is as fast as alone
    tight = serve_advise.choose(table, "resnet50", rate, "15ms", "resnet50 x2")
    assert tight.row is None and "serve alone" not in tight.text  # alone it is above 15 ms too
    assert f"nor serving alone: alone its p99 is {alone.mean():.1f} ms against 15 ms" in tight.text
    loose = f"{(alone.mean() + best) / 2:.2f}ms"  # alone meets it; every shared setting at this rate is slower
    met_alone = serve_advise.choose(table, "resnet50", rate, loose, "resnet50 x2")
    assert met_alone.row is None and "serve alone (alone its p99 is" in met_alone.text
    at_slo = serve_advise.choose(table, "resnet50", rate, "25ms", "resnet50 x2")  # the set's own SLO: one within it
    within = shared[shared["latency_p99_ms"] <= 25]
    assert len(within) == 1 and at_slo.row["mode_label"] == within["mode_label"].iloc[0]
    met = sum(p99 <= 25 for p99 in at_slo.row["launch_p99s_ms"])
    assert 0 < met < 3 and f"<= 25 ms; {met} of 3 launches within it (measured)" in at_slo.text  # the spread, said
    one = table[table["shared"] & (table["served"] == "resnet50") & (table["mix"] == "resnet50 x1")]
    beside_one = serve_advise.choose(table, "resnet50", rate, "25ms", "resnet50 x1")
    assert beside_one.row is not None and beside_one.row["latency_p99_ms"] <= 25
    assert beside_one.row["train_images_per_s"] == one.loc[one["latency_p99_ms"] <= 25, "train_images_per_s"].max()


def test_advise_serve_answers_from_the_shipped_h200_set_by_default(capsys):
    assert advise_serve.REFERENCE == "h200-inference" and advise_serve.REFERENCE in colloc_kit.reference.available()
    assert main(["advise", "--serve", "resnet50", "--rate", "38.5", "--slo", "25ms", "--beside", "resnet50 x1"]) == 0
    said = capsys.readouterr().out
    assert "\nchosen: mps: training 2107 images/s beside it, p99 19.4 ms (geometric mean of 3 launches" in said
    assert "one more launch 15.0-25.1) <= 25 ms; 3 of 3 launches within it (measured)" in said  # most training
    assert main(["advise", "--serve", "resnet50", "--rate", "38.5", "--slo", "22ms", "--beside", "resnet50 x2"]) == 0
    assert ("\nchosen: no measured shared setting kept the p99 within the SLO: serve alone (alone its p99 is 20.9 ms"
            in capsys.readouterr().out)  # beside two trainers every setting's p99 is above 22 ms in the set
    assert main(["advise", "--serve", "resnet50", "--rate", "150", "--slo", "25ms", "--beside", "resnet50 x2"]) == 2
    assert "measured: resnet50 at 38.5/s beside resnet50 x1" in capsys.readouterr().err  # what the set holds


def test_the_shipped_p99_table_gives_every_bound_marks_a_missing_one_and_the_figure_tells_mixes_apart():
    table = serve_advise.frontier(colloc_kit.reference.load("h200-inference"))
    assert len(table) == 26 and (~table["shared"]).sum() == 2  # 2 served models x 3 mixes; exclusive on the first
    shown, note = fits.p99_table(table)
    text = shown.astype(str).to_string()
    assert "nan" not in text.lower() and "none" not in text.lower()
    assert table["requests_in_window"].min() >= 400 and table["latency_p99_ms_hi"].notna().all()  # 12-s windows
    assert note == "" and not shown["p99 95 % CI (ms)"].str.contains(fits.NO_BOUND).any()  # every bound: no mark
    short = table.index < 3  # the same runs as if their windows had held too few requests (6-s ones, as in session 22)
    shorter = table.assign(latency_p99_ms_hi=table["latency_p99_ms_hi"].mask(short),
                           requests_in_window=table["requests_in_window"].mask(short, [221, 230, 247] + [0] * 23),
                           window_s=table["window_s"].mask(short, 6.0))
    bounds, note = fits.p99_table(shorter)
    assert bounds["p99 95 % CI (ms)"][short].str.endswith(f"– {fits.NO_BOUND}").all()
    assert not bounds["p99 95 % CI (ms)"][~short].str.contains(fits.NO_BOUND).any()
    assert note == (f"{fits.NO_BOUND} : too few requests for the upper bound (6-s windows, 221-247 requests; a "
                    "p99's upper bound needs about 400)")
    figure = safe_share(table)
    keys = {t.name: t.marker.symbol for t in figure.data if t.hoverinfo == "skip"}
    assert {f"beside {mix}" for mix in table["mix"]} <= set(keys)
    assert len({keys[f"beside {mix}"] for mix in table["mix"]}) == 3  # a shape per mix
    assert "MPS, training at 50 %" in keys and not any("+8 x" in name for name in keys)


def test_a_sweeps_thread_shares_are_one_per_job():
    serve = JobSpec(model="resnet50", role="serve", rate_per_s=50, slo="25ms")
    spec = serve_advise.sweep_spec(serve, [(JobSpec(model="resnet50"), 2)], name="x")
    shares = [m.options["thread_percentage"] for m in spec.modes if "thread_percentage" in m.options]
    assert shares == [[100, 25, 25], [100, 50, 50], [100, 75, 75]]  # three jobs: the served one and 2 copies
    assert short_label(spec.modes[-1].label).count("75") == 1  # not '100+8 x 75 %' for three jobs


def test_a_confirmation_counts_repeats_within_the_slo_the_training_kept_and_the_p99s_inside_the_advised_range():
    table = serve_advise.frontier(colloc_kit.reference.load("h200-inference"))
    advice = serve_advise.choose(table, "resnet50", 38.5, "25ms", "resnet50 x1")
    chosen = advice.row  # three launches: the range one more launch's p99 falls in
    assert chosen is not None and chosen["launches"] == 3
    assert chosen["next_p99_ms_lo"] < chosen["latency_p99_ms_lo"] < 22.0 < chosen["next_p99_ms_hi"] < 27.5
    repeated = pd.DataFrame({"latency_p99_ms": [chosen["latency_p99_ms"], 27.5, 22.0],
                             "within_slo": [True, False, True],
                             "train_images_per_s": chosen["train_images_per_s"] * pd.Series([1.0, 0.9, 0.8])})
    confirmed = serve_advise.confirmation(advice, repeated)
    assert (confirmed.runs, confirmed.within_ci) == (3, pytest.approx(2 / 3))  # 27.5 ms lies above the range
    assert confirmed.within_slo == pytest.approx(2 / 3) and confirmed.training_kept == pytest.approx(0.9)
    assert not confirmed.held  # 67 % within the SLO, short of 90 %
    assert confirmed.line("mps").endswith("p99 inside the 95 % range of one more launch (3 launches) in 67 % "
                                          "(target 90 %)")
    one = serve_advise.by_setting(serve_advise.run_rows(colloc_kit.reference.load("h200-inference")).iloc[[0]])
    one_launch = one.iloc[0]  # one launch: its window's CI, which a repeat often leaves
    assert one_launch["p99_ci_from"] == "one window" and pd.isna(one_launch["next_p99_ms_hi"])
    said = serve_advise.confirmation(replace(advice, row=one_launch), repeated).line("mps")
    assert "p99 inside the chosen run's 95 % CI in" in said
    unbounded = one_launch.copy()
    unbounded["latency_p99_ms_hi"] = math.nan  # a window too short for the upper bound
    said = serve_advise.confirmation(replace(advice, row=unbounded), repeated).line("mps")
    assert said.endswith("the chosen run's 95 % CI: no bound to agree within")
    with pytest.raises(BadInput, match="nothing confirmed"):
        serve_advise.confirmation(replace(advice, row=None), repeated)
