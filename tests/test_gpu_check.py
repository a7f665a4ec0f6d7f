"""benchmarks/gpu_check.py's parts that need no GPU: what it does without CUDA, its
arguments, the table and the JSON it writes (from made-up rows), and the logic its checks
rest on: which ``run.log()`` calls read back, where a sync was, interval speeds, the DDP
loss match, the sweep it writes from a suite. The checks themselves run on a GPU only."""

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from spikebench import metrics as M

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
_spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
gc = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("gpu_check", gc)  # its dataclasses look their module up
_spec.loader.exec_module(gc)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_without_cuda_it_says_so_in_one_line_and_exits_2(tmp_path):
    out = tmp_path / "gpu-check.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--work",
                           str(tmp_path / "work")], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("gpu_check: no CUDA device here (torch ")
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_arguments():
    a = gc.parse_args([])
    assert a.parts == list(gc.PARTS) and a.out == "results/gpu-check.json"
    assert (a.steps, a.batch, a.seq_len) == (50, 32, 256)  # the GPU suite's batch
    assert gc.parse_args(["--parts", "ddp, sync"]).parts == ["sync", "ddp"]  # run order


@pytest.mark.parametrize("argv", [["--parts", "sync,gpu"], ["--parts", ","],
                                  ["--steps", "0"], ["--batch", "x"],
                                  ["--sweep-steps", "39"]])
def test_bad_arguments_exit_2_in_one_line(argv, capsys):
    with pytest.raises(SystemExit) as e:
        gc.parse_args(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("gpu_check.py: error: argument ")


ROWS = [
    gc.Row("sync", "loop + ZClip + probes (fp32)", gc.OK, "60 steps", "no sync between "
           "read-backs", {"steps": 60}),
    gc.Row("sync", "run API log()", gc.FAIL, "synced",
           "RuntimeError: called a synchronizing CUDA operation at spikebench/api/run.py:140"),
    gc.Row("speed", "gpt-125m bf16, compiled", gc.INFO, "41.0 ms/step", "",
           {"mfu": 0.31, "compile_s": math.nan, "peak_memory_bytes": 2**33}),
]


def test_the_table_has_one_line_per_row_under_one_header():
    text = gc.format_table(ROWS)
    lines = text.splitlines()
    assert [c.strip() for c in lines[0].split("|")[1:-1]] == ["part", "check", "result",
                                                               "value", "note"]
    assert len(lines) == 2 + len(ROWS)
    assert "| FAIL " in lines[3] and "spikebench/api/run.py:140" in lines[3]


def test_the_json_keeps_every_row_and_its_numbers(tmp_path):
    args = gc.parse_args(["--parts", "sync,speed"])
    data = gc.payload(ROWS, environment={"gpu": "made up"}, args=args,
                      details={"speed": {"runs": {}}}, started=0.0)
    path = gc.write_json(tmp_path / "deep" / "gpu-check.json", data)
    back = json.loads(path.read_text())  # strict JSON: NaN is written as null
    assert back["format"] == gc.FORMAT and back["parts"] == ["sync", "speed"]
    assert back["failed"] == ["sync: run API log()"]
    assert [r["check"] for r in back["rows"]] == [r.check for r in ROWS]
    assert back["rows"][2]["numbers"] == {"mfu": 0.31, "compile_s": None,
                                          "peak_memory_bytes": 2**33}
    assert back["environment"] == {"gpu": "made up"} and back["details"] == {"speed": {
        "runs": {}}}


def test_the_api_calls_armed_are_exactly_those_that_do_not_read_back(tmp_path, monkeypatch):
    """The wrapper arms the guard unless reads_back() says the call reads back; checked
    against the API itself (on the CPU, with a recorder for torch's sync mode)."""
    import spikebench
    from spikebench.api import run as api_run
    from spikebench.train.sync_debug import SyncDebug

    assert [n for n in range(1, 31) if gc.reads_back(n, 10)] == [10, 20, 30]
    calls: list[str] = []
    guard = SyncDebug("error", setter=calls.append)
    reads: list[bool] = []
    real = api_run._read_back

    def spy(rows):
        reads.append(guard.armed)
        return real(rows)

    monkeypatch.setattr(api_run, "_read_back", spy)
    run = spikebench.init(run_dir=tmp_path / "api", sync_every=4, device="cpu")
    for step in range(1, 13):
        with guard.lifted() if gc.reads_back(step, 4) else guard.armed_for():
            run.log(step, loss=torch.tensor(3.0 - step / 100), grad_norm=torch.tensor(1.0))
    run.finish()
    assert reads[:3] == [False, False, False]  # steps 4, 8, 12 read back, disarmed
    assert calls == ["error", "default"] * 9  # the other 9 calls, armed
    assert not guard.armed


def test_where_names_the_innermost_spikebench_line():
    from spikebench import config as c

    try:
        c.load(None, ["no_such.key=1"])
    except Exception as e:  # noqa: BLE001
        at = gc.where(e)
        first = gc.first_line(e)
    assert at.startswith("spikebench/config/") and ":" in at and " in " in at
    assert first.startswith("UserError: unknown key 'no_such")


def test_interval_speed_takes_one_rate_per_read_back_after_the_first():
    rows = [{M.STEP: 0}]
    for step, rate in zip(range(1, 31), [1000.0] * 10 + [4000.0] * 10 + [6000.0] * 10,
                          strict=True):
        rows.append({M.STEP: step, M.TOKENS_PER_S: rate})
    got = gc.interval_speed(rows, tokens_per_step=8192)
    assert got == {"tokens_per_s": 5000.0, "ms_per_step": 1e3 * 8192 / 5000.0,
                   "intervals": 2}
    assert gc.interval_speed(rows[:11], 8192) is None  # the warm-up interval only
    assert gc.mfu(6e12, 20.0, 1e15) == pytest.approx(0.3)


def test_the_ddp_loss_match():
    one = [{M.STEP: s, M.TRAIN_LOSS: 5.0 - s / 10} for s in range(1, 21)]
    close = [dict(r, **{M.TRAIN_LOSS: r[M.TRAIN_LOSS] * (1 + 2e-6)}) for r in one]
    ok, worst, why = gc.loss_match(one, close, 10, 1e-4)
    assert ok and worst == pytest.approx(2e-6) and why == ""
    far = [dict(r, **{M.TRAIN_LOSS: r[M.TRAIN_LOSS] * (1 + 1e-3)}) if r[M.STEP] == 7 else r
           for r in one]
    ok, worst, why = gc.loss_match(one, far, 10, 1e-4)
    assert not ok and why == "relative difference 1.00e-03 > 0.0001"
    late = [dict(r, **{M.TRAIN_LOSS: 9.0}) if r[M.STEP] == 15 else r for r in one]
    assert gc.loss_match(one, late, 10, 1e-4)[0]  # only the first steps are judged
    assert gc.loss_match(one, one[:5], 10, 1e-4)[2] == ("logged steps differ (10 against 5 "
                                                          "of the first 10)")
    nan = [dict(r, **{M.TRAIN_LOSS: math.nan}) if r[M.STEP] == 3 else r for r in one]
    assert not gc.loss_match(one, nan, 10, 1e-4)[0]


def test_the_utilisation_line_is_found_in_the_sweeps_output():
    text = ("study 'x' in r/x/: 0/5 trials done\n#1 done\n"
            "utilisation: 81.2% of 1 worker(s) x 95 s spent training (77 s); the rest is ...\n")
    assert gc.utilisation_line(text).startswith("utilisation: 81.2% of 1 worker(s)")
    assert gc.utilisation_line("no such line") is None


def test_the_sweep_written_from_the_cpu_suite_has_its_scenarios(tmp_path):
    from spikebench.bench.suite import load_suite
    from spikebench.sweep.spec import load_sweep

    suite = ROOT / "benchmarks" / "suites" / "cpu.toml"
    path = tmp_path / "sweep.toml"
    path.write_text(gc.sweep_from_suite(suite.read_text(), name="gpu-check-sweep", seeds=3))
    sweep, original = load_sweep(path, ["train.device=cuda"]), load_suite(suite).spec
    assert sweep.name == "gpu-check-sweep" and sweep.seeds == original.seeds[:3]
    assert sweep.arms == original.arms and sweep.trials == 0
    assert sweep.base == {**original.base, "train.device": "cuda"}
