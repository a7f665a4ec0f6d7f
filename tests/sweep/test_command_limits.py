"""Command trials that never end, and the [trainer] and [comparison] tables' refusals
(issue 45): a command that hangs without writing, or writes rows for ever, is stopped by
``stall_s`` or ``timeout_s`` (SIGTERM, then SIGKILL after ``grace_s``) and its seed fails
with the reason; a sweep whose every trial failed exits 1 naming the first one's log. Real
subprocess commands, limits of a few seconds."""

import json
import sys
import time
from pathlib import Path

import optuna
import pytest
from fuzzkit import deadline
from optuna.trial import TrialState
from procs import processes_with

from spikebench.cli import main
from spikebench.errors import UserError
from spikebench.sweep.command import Clock
from spikebench.sweep.spec import load_sweep
from spikebench.sweep.storage import default_storage

PY = json.dumps(sys.executable)
# "rows": a row every 0.2 s, for ever (the log grows: only timeout_s stops it); "silent":
# never a row, and SIGTERM ignored (stall_s stops it, SIGKILL after grace_s ends it).
SCRIPT = """
import json, os, signal, time
p = json.load(open(os.environ["SPIKEBENCH_PARAMS_FILE"]))
if p["mode"] == "rows":
    with open("log.csv", "w") as f:
        f.write("step,loss\\n")
        for s in range(1, 10 ** 6):
            f.write(f"{s},{3 - s / 1e6}\\n")
            f.flush()
            time.sleep(0.2)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(600)
"""


def test_hung_commands_are_stopped_and_a_sweep_of_failed_trials_exits_1(tmp_path, capsys):
    script = tmp_path / "hang.py"
    script.write_text(SCRIPT)
    f = tmp_path / "hang.toml"
    f.write_text(f"""
[study]
name = "hang"
target_loss = 2.5
seeds = [0, 1]
[trainer]
command = [{PY}, "{script}"]
log = "log.csv"
steps = 1000
timeout_s = 4
stall_s = 2
grace_s = 1
[config]
mode = "silent"
[comparison]
recipe = false
[comparison.arms]
rows = {{ mode = "rows" }}
""")
    results = tmp_path / "r"
    start = time.monotonic()
    with deadline(90):
        code = main(["sweep", str(f), "--results", str(results), "--jobs", "1"])
    assert time.monotonic() - start < 60
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1  # the work failed; 2 is bad input
    study = optuna.load_study(study_name="hang", storage=default_storage(results / "hang"))
    trials = {t.user_attrs["arm"]: t for t in study.get_trials()}
    stop = " (stopped: SIGTERM, then SIGKILL after grace_s)"
    silent, rows = trials["baseline"], trials["rows"]
    assert silent.state == rows.state == TrialState.FAIL
    assert silent.user_attrs["error"] == (
        "seed 0: stalled: its log 'log.csv' did not grow for stall_s = 2 s" + stop)
    assert rows.user_attrs["error"] == (
        "seed 0: timed out: still running after timeout_s = 4 s" + stop)
    for t in (silent, rows):
        folder = Path(t.user_attrs["dir"])
        # The reason is the last line of the seed's own stderr.log; no later seed started.
        last = (folder / "seed-0" / "stderr.log").read_text().splitlines()[-1]
        assert last == "spikebench: seed 0 failed: " + t.user_attrs["error"][len("seed 0: "):]
        assert not (folder / "seed-1").exists()
    assert len((Path(rows.user_attrs["dir"]) / "seed-0" / "log.csv").read_text()
               .splitlines()) > 5  # it did write rows: the timeout, not the stall, ended it
    seed_log = Path(silent.user_attrs["dir"]) / "seed-0" / "stderr.log"
    assert err[-1] == ("spikebench sweep: all 2 trial(s) failed; the first, #0 (baseline): "
                       f"{silent.user_attrs['error']}; its log: {seed_log}")
    assert not processes_with(str(script))  # SIGKILL reached the one that ignored SIGTERM


def test_the_stall_clock_counts_from_the_start_and_resets_on_growth(tmp_path):
    log = tmp_path / "metrics.jsonl"  # the API's log: its .partial grows while it runs
    clock = Clock({"log": "", "timeout_s": 0, "stall_s": 0.4}, log)
    time.sleep(0.2)
    assert clock.expired() == ""
    (tmp_path / "metrics.jsonl.partial").write_text('{"step": 1}\n')
    assert clock.expired() == ""  # it grew: the clock starts again
    time.sleep(0.25)
    assert clock.expired() == ""
    time.sleep(0.25)
    assert clock.expired().startswith("stalled: its log 'metrics.jsonl (spikebench.init)'")


FILE = """[study]
target_loss = 3.0
[trainer]
command = ["python", "train.py", "{{args}}"]
steps = 10
{trainer}
[config]
lr = 0.1
{config}
[space]
{space}
[comparison]
{comparison}
"""


@pytest.mark.parametrize("parts, message", [
    ({"config": "seed = 5"}, "config.seed = 5: the seed is not a parameter"),
    ({"space": "seed = { low = 0, high = 9, int = true }"}, "space.seed = "),
    ({"comparison": 'baseline = { seed = 1 }'}, "comparison.baseline.seed = 1: the seed is"),
    ({"comparison": '[comparison.arms]\nx = { seed = 1 }'},
     'comparison.arms."x".seed = 1: the seed is not a parameter'),
    ({"comparison": '[comparison.arms]\nfast = { lrr = 0.2 }'},
     'comparison.arms."fast".lrr = 0.2: unknown parameter in arm "fast" (allowed: lr:'),
    ({"comparison": 'recipe = { warmup = 10 }'},
     'comparison.recipe.warmup = 10: unknown parameter in arm "recipe" (allowed: lr:'),
    ({"config": 'name = "a\\u0000b"'}, 'config.name = "a\\u0000b": holds a NUL byte'),
    ({"trainer": "timeout_s = -1"}, "trainer.timeout_s = -1: must be a number of seconds"),
    ({"trainer": 'stall_s = "5"'}, 'trainer.stall_s = "5": must be a number of seconds'),
    ({"trainer": "stall_s = true"}, "trainer.stall_s = true: must be a number"),
    ({"trainer": "timeout_s = inf"}, "trainer.timeout_s = inf: must be a number"),
    ({"trainer": 'log = "."'}, 'trainer.log = ".": must be the name of a file or folder'),
    ({"trainer": 'log = "a\\u0000b"'}, "trainer.log = "),
    ({"trainer": 'env = { A = "a\\u0000b" }'}, 'trainer.env."A" = "a\\u0000b": an environment'),
    ({"trainer": 'env = { "A=B" = "1" }'}, 'trainer.env."A=B" = "1": an environment'),
    ({"trainer": 'env = { "" = "1" }'}, 'trainer.env."" = "1": an environment'),
])
def test_trainer_and_comparison_refusals(tmp_path, parts, message):
    f = tmp_path / "bad.toml"
    f.write_text(FILE.format(**{"trainer": "", "config": "", "space": "", "comparison": "",
                                **parts}))
    with pytest.raises(UserError) as e:
        load_sweep(f)
    text = str(e.value)
    assert message in text and "\n" not in text, text


def test_a_seed_on_the_command_line_is_refused_too(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text(FILE.format(trainer="", config="", space="", comparison=""))
    with pytest.raises(UserError, match=r"config\.seed = 3: the seed is not a parameter"):
        load_sweep(f, ["seed=3"])
    # The baseline declares a parameter of its own; the arms may then change it.
    f.write_text(FILE.format(trainer="timeout_s = 30\nstall_s = 0", config="", space="",
                             comparison='baseline = { warmup = 0 }\n[comparison.arms]\n'
                                        'warm = { warmup = 10 }'))
    spec = load_sweep(f)
    assert spec.arms["warm"] == {"warmup": 10}
    assert (spec.trainer["timeout_s"], spec.trainer["stall_s"]) == (30.0, 0.0)
