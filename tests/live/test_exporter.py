"""The exported metrics: Prometheus naming, what a record updates, following trial logs,
and the shipped dashboard naming only exported metrics."""

import json
import re
from pathlib import Path

from spikebench import metrics as M
from spikebench.live.exporter import COUNTERS, Exporter, metric_names
from spikebench.live.follow import Follower

ROOT = Path(__file__).resolve().parents[2]


def _value(ex, name, **labels):
    return ex.registry.get_sample_value(name, labels)


def test_names_follow_prometheus_conventions():
    names = metric_names()
    assert all(n.startswith("spikebench_") for n in names)
    assert all(n.endswith("_total") for n, _ in COUNTERS)
    assert [n for n in names if "memory" in n] == [n for n in names if n.endswith("_bytes")]
    ex = Exporter()
    for family in ex.registry.collect():
        for sample in family.samples:
            assert "step" not in sample.labels  # never a high-cardinality label


def test_a_record_sets_gauges_and_counts_events_across_seeds():
    ex = Exporter()
    rec = {M.STEP: 40, M.TRAIN_LOSS: 3.5, M.GRAD_NORM: 0.7, M.LR: 1e-3, M.LOSS_SCALE: 1.0,
           M.TOKENS_PER_S: 5e4, M.MEM_RSS: 123456789, M.SPIKE_EVENTS: 2}
    ex.observe(rec, "3", "baseline", source="seed-0")
    assert _value(ex, "spikebench_train_loss", trial="3", arm="baseline") == 3.5
    assert _value(ex, "spikebench_step", trial="3", arm="baseline") == 40
    assert _value(ex, "spikebench_resident_memory_bytes", trial="3", arm="baseline") == 123456789
    assert _value(ex, "spikebench_spike_events_total", trial="3", arm="baseline") == 2
    ex.observe({**rec, M.SPIKE_EVENTS: 2}, "3", "baseline", source="seed-0")  # no new event
    ex.observe({**rec, M.SPIKE_EVENTS: 1}, "3", "baseline", source="seed-1")  # the next seed
    assert _value(ex, "spikebench_spike_events_total", trial="3", arm="baseline") == 3
    ex.observe({M.STEP: 41, M.ROLLBACK: 1, M.TRAIN_LOSS: float("nan")}, "3", "baseline")
    assert _value(ex, "spikebench_rollbacks_total", trial="3", arm="baseline") == 1
    assert _value(ex, "spikebench_train_loss", trial="3", arm="baseline") == 3.5  # NaN kept out
    ex.sweep_progress(done=4, running=2, failed=1)
    assert _value(ex, "spikebench_sweep_trials", state="failed") == 1


def test_the_follower_reads_a_running_seeds_partial_log_once(tmp_path):
    trial = tmp_path / "trials" / "00007"
    (trial / "seed-0").mkdir(parents=True)
    (trial / "trial.json").write_text(json.dumps({"number": 7, "arm": "clip 1.0"}))
    # A running seed writes metrics.jsonl.partial (renamed to metrics.jsonl at its end).
    log = trial / "seed-0" / "metrics.jsonl.partial"
    log.write_text(json.dumps({M.STEP: 1, M.TRAIN_LOSS: 5.0, M.SPIKE_EVENTS: 0}) + "\n"
                   + json.dumps({M.STEP: 2, M.TRAIN_LOSS: 4.0, M.SPIKE_EVENTS: 1}) + "\n"
                   + '{"step": 3, "tr')
    ex = Exporter()
    f = Follower(ex, tmp_path / "trials")
    f.poll()
    labels = {"trial": "7", "arm": "clip 1.0"}
    assert _value(ex, "spikebench_train_loss", **labels) == 4.0
    with open(log, "a") as out:  # the half-written line is completed
        out.write('ain/loss": 3.0, "spikes/loss_events": 1}\n')
    f.poll()
    assert _value(ex, "spikebench_step", **labels) == 3
    log.rename(log.with_name("metrics.jsonl"))  # the seed ends: the same bytes
    (trial / "result.json").write_text("{}")
    f.poll()
    f.poll()
    assert _value(ex, "spikebench_spike_events_total", **labels) == 1  # not read twice
    assert _value(ex, "spikebench_rollbacks_total", **labels) == 0  # exported from 0


def test_the_dashboard_parses_and_every_panel_names_an_exported_metric():
    dash = json.loads((ROOT / "monitoring" / "grafana-dashboard.json").read_text())
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    exported = set(metric_names())
    seen = set()
    for panel in dash["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}"
        for target in panel["targets"]:
            names = set(re.findall(r"spikebench_[a-z_]+", target["expr"]))
            assert names and names <= exported, target["expr"]
            seen |= names
    assert seen == exported  # a panel per metric


def test_bad_metrics_options_are_one_line_and_run_nothing(tmp_path, capsys):
    import socket

    from spikebench.cli import main

    assert main(["train", "--metrics-port", "70000", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'70000': must be a port number" in err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        rc = main(["train", "--metrics-port", str(port), "--set",
                   f"run.out_dir={tmp_path / 'runs'}", "--set", "train.steps=5"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and f"cannot listen on 127.0.0.1:{port}" in err
    assert not (tmp_path / "runs").exists()  # nothing half-run
