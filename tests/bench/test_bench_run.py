"""`spikebench bench` end to end: real trials through the sweep's workers, a recorded
baseline, an unchanged run that passes, planted regressions that are caught, and a baseline
from another environment compared statistically, never exactly."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spikebench.bench.compare import judge_perf
from spikebench.bench.run import compare
from spikebench.bench.suite import load_suite

# Every test here judges measured overhead ratios against a tolerance.
pytestmark = pytest.mark.serial

CPU_SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "suites" / "cpu.toml"
SUITE = """
[study]
name = "tiny"
target_loss = 4.5
seeds = [0, 1, 2, 3]
trials = 0

[config]
model.preset = "gpt-tiny"
train.steps = 30
train.eval_every = 15
train.eval_batches = 2
optim.lr = 0.05
data.max_bytes = 200000

[comparison]
recipe = false

[comparison.arms]
"clipped" = { "optim.clip" = 0.3 }

[bench]
level = 0.2  # 4 seeds per side: smallest p 1/70, within Holm's first threshold 0.2 / 8

[bench.perf]
overhead_steps = 0
sweep_trials = 0
report_trials = 0
"""

# Planted in every process of a run through PYTHONPATH: train_step ignores its clip.
NO_CLIP = """
import math
import spikebench.train.loop as loop
_step = loop.train_step
def _unclipped(*a, **k):
    k["clip"] = math.inf
    return _step(*a, **k)
loop.train_step = _unclipped
"""


def _bench(tmp_path, *extra, env=None):
    cmd = [sys.executable, "-m", "spikebench", "bench", "--suite", str(tmp_path / "tiny.toml"),
           "--baseline", str(tmp_path / "base.json"), "--results", str(tmp_path / "r"),
           "--jobs", "2", *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                         env={**os.environ, **(env or {})})
    runs = sorted((tmp_path / "r" / "bench").glob("tiny-*"))
    report = json.loads((runs[-1] / "bench.json").read_text()) if runs and (
        runs[-1] / "bench.json").exists() else None
    time.sleep(1.1)  # the next run gets its own time-stamped folder
    return out, report


def _verdicts(report):
    return {(v["scenario"], v["metric"]): v["verdict"] for v in report["verdicts"]}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    (tmp / "tiny.toml").write_text(SUITE)
    out, _ = _bench(tmp, "--update-baseline")
    assert out.returncode == 0, out.stderr
    return tmp


def test_a_recorded_baseline_holds_the_environment_and_every_loss(recorded):
    base = json.loads((recorded / "base.json").read_text())
    env = base["environment"]
    assert {"device", "cpu_model", "torch_threads", "torch", "python", "corpus"} <= set(env)
    seeds = base["scenarios"]["clipped"]["seeds"]
    assert set(seeds) == {"0", "1", "2", "3"} and len(seeds["0"]["losses"]) == 30
    assert {"n_events", "severity", "steps_to_target", "final_val_loss"} <= set(seeds["0"])


def test_an_unchanged_run_passes_bit_for_bit(recorded):
    out, report = _bench(recorded)
    assert out.returncode == 0, out.stdout + out.stderr
    assert report["environment_differs"] == []
    v = _verdicts(report)
    assert v[("baseline", "losses")] == v[("clipped", "losses")] == "pass"
    assert all(x == "pass" for x in v.values())
    assert "0 regression(s)" in out.stdout and "bit for bit" in out.stdout


def test_clipping_silently_disabled_is_caught(recorded):
    (recorded / "planted").mkdir(exist_ok=True)
    (recorded / "planted" / "sitecustomize.py").write_text(NO_CLIP)
    path = os.pathsep.join([str(recorded / "planted"), os.environ.get("PYTHONPATH", "")])
    out, report = _bench(recorded, env={"PYTHONPATH": path})
    assert out.returncode == 1, out.stdout + out.stderr
    v = _verdicts(report)
    assert v[("clipped", "losses")] == "changed"
    assert v[("baseline", "losses")] == "pass"  # unclipped anyway: the same losses
    assert "CHANGED" in out.stdout and "1 regression(s)" in out.stdout


def test_a_baseline_from_another_environment_is_compared_statistically_only(recorded):
    suite = load_suite(recorded / "tiny.toml")
    base = json.loads((recorded / "base.json").read_text())
    current = json.loads((recorded / "base.json").read_text())  # the same figures
    foreign = {**base, "environment": {**base["environment"], "cpu_model": "Another CPU"}}
    verdicts, differs = compare(current, foreign, suite)
    assert differs == ["cpu_model"]
    assert not [v for v in verdicts if v.metric == "losses"]  # never exactly
    assert {v.metric for v in verdicts} == {"n_events", "severity", "steps_to_target",
                                            "final_val_loss"}
    assert all("Mann-Whitney" in v.test for v in verdicts)


def test_a_step_50_percent_slower_is_caught(monkeypatch):
    import statistics

    import spikebench.train.loop as loop
    from spikebench import config as cfgmod
    from spikebench.bench.perf import overhead

    cfg = cfgmod.load(None, ["train.steps=80", "train.eval_every=80", "train.progress=false",
                             "data.max_bytes=200000", "data.batch_size=8", "train.threads=1"])
    step = loop.train_step

    # train_step 50% slower, busy (a sleep overshoots short waits). On this shared CPU a
    # 20% slowdown was caught in three runs and missed in a fourth: unchanged ratios there
    # ranged from 0.91 to 1.29, and the slowed median came out 9.8% above, under the 10%
    # tolerance.
    def slower(*a, **k):
        t0 = time.perf_counter()
        out = step(*a, **k)
        until = time.perf_counter() + 0.5 * (time.perf_counter() - t0)
        while time.perf_counter() < until:
            pass
        return out

    # Unchanged and slowed measurements alternate, so drift in machine load hits both.
    ratios: dict[bool, list[float]] = {False: [], True: []}
    for i in range(5):
        for slow in (False, True):
            monkeypatch.setattr(loop, "train_step", slower if slow else step)
            ratios[slow].append(overhead(cfgmod.from_dict(cfg.to_dict()), 1, warm=i == 0,
                                         peak=False)["overhead_ratio"])
    before, after = statistics.median(ratios[False]), statistics.median(ratios[True])
    tolerance = load_suite(CPU_SUITE).perf.tolerance["overhead_ratio"]
    j = judge_perf("overhead_ratio", after, before, tolerance=tolerance)
    print("overhead ratio", before, "->", after)
    assert j.verdict == "regressed", ratios


def test_bad_suite_input_is_one_line(tmp_path, capsys):
    from spikebench.cli import main

    bad = SUITE.replace("level = 0.2", "level = 2")
    (tmp_path / "bad.toml").write_text(bad)
    assert main(["bench", "--suite", str(tmp_path / "bad.toml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bench.level = 2" in err and "<= 0.5" in err
    (tmp_path / "b2.toml").write_text(SUITE.replace("level = 0.2", "level = 0.2\nnope = 1"))
    assert main(["bench", "--suite", str(tmp_path / "b2.toml")]) == 2
    assert "unknown key 'bench.nope'" in capsys.readouterr().err
    (tmp_path / "b3.toml").write_text(SUITE.replace("report_trials = 0", "report_trials = 0\n"
                                                    "tolerance = { speed = 0.1 }"))
    assert main(["bench", "--suite", str(tmp_path / "b3.toml")]) == 2
    assert "'speed' is not a performance ratio" in capsys.readouterr().err
    assert load_suite(CPU_SUITE).perf.tolerance["sweep_scaling"] is None  # "off": shown
    (tmp_path / "base.json").write_text("{not json")
    assert main(["bench", "--suite", str(tmp_path / "ok.toml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ok.toml': not found" in err
    (tmp_path / "ok.toml").write_text(SUITE)
    assert main(["bench", "--suite", str(tmp_path / "ok.toml"), "--baseline",
                 str(tmp_path / "base.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a bench baseline" in err
    (tmp_path / "shallow.json").write_text('{"format": 1, "environment": {}, "scenarios": []}')
    assert main(["bench", "--suite", str(tmp_path / "ok.toml"), "--baseline",
                 str(tmp_path / "shallow.json")]) == 2
    assert "not a bench baseline" in capsys.readouterr().err
    # No baseline is an error, not a silent recording (CI would pass vacuously).
    assert main(["bench", "--suite", str(tmp_path / "ok.toml"), "--baseline",
                 str(tmp_path / "missing.json")]) == 2
    assert "missing.json': no such file (record one with --update-baseline)" in \
        capsys.readouterr().err
    # Seeds with which the exact test can never reject at the level are refused.
    (tmp_path / "few.toml").write_text(SUITE.replace("level = 0.2", "level = 0.05"))
    assert main(["bench", "--suite", str(tmp_path / "few.toml")]) == 2
    err = capsys.readouterr().err
    assert ("smallest p is then 0.0143 > bench.level / 8 tests = 0.00625" in err
            and "at least 5 seeds" in err)
    assert not (tmp_path / "results").exists()  # nothing was run
