"""`spikebench bench` on a trainer of the team's own (a suite with a `[trainer]` table): the
nanoGPT-style example run per seed, its baseline recorded with a determinism check, an
unchanged rerun that passes bit for bit and a planted change of the trainer's init scale
that is caught, exactly and by the tests; a trainer that is not deterministic, compared by
the tests only, whose logged tokens/s catches a planted slowdown; bad suite input as one
line."""

import json
import shutil
import sys
from pathlib import Path

import pytest

from spikebench.bench.run import compare
from spikebench.bench.suite import load_suite
from spikebench.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "nanogpt_csv" / "train.py"
PY = json.dumps(sys.executable)

# One scenario, 3 seeds: the exact test's smallest p, 1/20, is within Holm's first
# threshold 0.25 / 4 tests. 10 steps of the example's tiny GPT, validated every 5.
NANOGPT = f"""
[study]
name = "nanogpt"
target_loss = 3.5
seeds = [0, 1, 2]

[trainer]
command = [{PY}, "train.py", "--params", "{{params_file}}", "--seed", "{{seed}}",
           "--out", "log.csv"]
log = "log.csv"
steps = 10
eval_every = 5

[config]
steps = 10
eval_every = 5
lr = 3e-3

[comparison]
baseline = {{}}
recipe = false

[bench]
level = 0.25
"""

# A trainer without torch, fast: a smooth loss with noise in its last bits from an
# unseeded generator (so two runs of a seed never log the same losses), and the tokens/s
# of each step, which sleeps `sleep_s` (x SLOW, the planted slowdown).
TINY = """\
import argparse, csv, json, os, random, time
ap = argparse.ArgumentParser()
ap.add_argument("--params")
ap.add_argument("--out")
a = ap.parse_args()
p = json.load(open(a.params))
seed = int(os.environ["SPIKEBENCH_SEED"])  # the sweep's context, as spikebench.init reads it
SLOW = 1
noise = random.Random()
with open(a.out, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["step", "loss", "val_loss", "tokens_per_s"])
    for step in range(1, p["steps"] + 1):
        t0 = time.perf_counter()
        time.sleep(p["sleep_s"] * SLOW)
        dt = time.perf_counter() - t0
        loss = 4.0 - 0.05 * step + 1e-3 * seed + 1e-9 * noise.random()
        w.writerow([step, repr(loss), repr(loss + 0.1) if step % 5 == 0 else "",
                    repr(p["tokens"] / dt)])
"""

TINY_COMMAND = f'command = [{PY}, "tiny.py", "--params", "{{params_file}}", "--out", "log.csv"]'
TINY_SUITE = f"""
[study]
name = "tiny-trainer"
target_loss = 3.5
seeds = [0, 1, 2]

[trainer]
{TINY_COMMAND}
log = "log.csv"
steps = 20
eval_every = 5

[config]
steps = 20
sleep_s = 0.01
tokens = 512

[comparison]
baseline = {{}}
recipe = false

[bench]
level = 0.25

[bench.perf]
tokens_per_s = "tokens_per_s"
tolerance = {{ trainer_tokens_per_s = 0.3 }}
"""


class Ran:
    def __init__(self, code: int, out: str, err: str):
        self.returncode, self.stdout, self.stderr = code, out, err


def _bench(folder: Path, suite: str, capsys, *extra: str):
    """``spikebench bench`` in this process (its trials run in their own); the exit code,
    stdout and stderr, and the run's bench.json (None when it wrote none)."""
    code = main(["bench", "--suite", str(folder / suite), "--baseline",
                 str(folder / "base.json"), "--results", str(folder / "r"), "--jobs", "1",
                 *extra])
    out, err = capsys.readouterr()
    written = [line for line in out.splitlines() if line.startswith("written: ")]
    report = json.loads(Path(written[-1].split(", ")[-1]).read_text()) if written else None
    return Ran(code, out, err), report


def _verdicts(report):
    return {(v["scenario"], v["metric"]): v["verdict"] for v in report["verdicts"]}


def test_a_nanogpt_trainer_passes_unchanged_and_a_planted_init_scale_is_caught(tmp_path,
                                                                              capsys):
    shutil.copy(EXAMPLE, tmp_path / "train.py")
    (tmp_path / "nanogpt.toml").write_text(NANOGPT)

    out, _ = _bench(tmp_path, "nanogpt.toml", capsys, "--update-baseline")
    assert out.returncode == 0, out.stdout + out.stderr
    base = json.loads((tmp_path / "base.json").read_text())
    assert base["determinism"]["how"] == "checked"
    assert base["determinism"]["deterministic"] is True, base["determinism"]
    assert "the trainer is deterministic" in out.stdout
    assert list((tmp_path / "r" / "bench").glob("nanogpt-*/repeat/nanogpt-repeat/study.db"))
    seeds = base["scenarios"]["baseline"]["seeds"]
    assert set(seeds) == {"0", "1", "2"} and all(len(s["losses"]) == 10 for s in seeds.values())
    assert all(s["final_val_loss"] is not None for s in seeds.values())
    assert {"device", "cpu_model", "torch_threads", "torch", "python"} <= set(base["environment"])
    assert base["perf"] == {}  # the example logs no throughput column: said, not judged
    assert "performance: not measured" in out.stdout

    out, report = _bench(tmp_path, "nanogpt.toml", capsys)
    assert out.returncode == 0, out.stdout + out.stderr
    assert report["exact"] is True and report["environment_differs"] == []
    v = _verdicts(report)
    assert v[("baseline", "losses")] == "pass"
    assert all(x == "pass" for x in v.values()), v
    assert "0 regression(s)" in out.stdout and "bit for bit" in out.stdout

    # Planted: the trainer's own code now initialises its weights at 0.5, not 0.02.
    code = (tmp_path / "train.py").read_text()
    assert '"init_scale": 0.02' in code
    (tmp_path / "train.py").write_text(code.replace('"init_scale": 0.02', '"init_scale": 0.5'))
    out, planted = _bench(tmp_path, "nanogpt.toml", capsys)
    assert out.returncode == 1, out.stdout + out.stderr
    v = _verdicts(planted)
    assert v[("baseline", "losses")] == "changed"
    assert "CHANGED" in out.stdout and "regression(s)" in out.stdout
    assert "seed 0 differs from step 1" in out.stdout

    # The same figures where the trainer is declared not deterministic: no exact check, and
    # the tests alone call the regression (3 vs 3 seeds, completely separated).
    (tmp_path / "nd.toml").write_text(NANOGPT.replace("level = 0.25",
                                                      "level = 0.25\ndeterministic = false"))
    verdicts, differs = compare(planted, base, load_suite(tmp_path / "nd.toml"))
    assert differs == []
    assert not [j for j in verdicts if j.metric == "losses"]
    final = next(j for j in verdicts if j.metric == "final_val_loss")
    assert final.verdict == "regressed" and final.effect > 0.5, final


def test_a_trainer_that_is_not_deterministic_is_compared_by_the_tests_and_its_speed(
        tmp_path, capsys):
    (tmp_path / "tiny.py").write_text(TINY)
    (tmp_path / "tiny.toml").write_text(TINY_SUITE)

    out, _ = _bench(tmp_path, "tiny.toml", capsys, "--update-baseline")
    assert out.returncode == 0, out.stdout + out.stderr
    base = json.loads((tmp_path / "base.json").read_text())
    assert base["determinism"]["deterministic"] is False, base["determinism"]
    assert "seed 0 run twice" in base["determinism"]["evidence"]
    assert "the trainer is NOT deterministic" in out.stdout
    assert base["perf"]["trainer_tokens_per_s"] > 0
    assert base["perf"]["trainer_tokens_per_s_column"] == "tokens_per_s"

    out, report = _bench(tmp_path, "tiny.toml", capsys)
    assert out.returncode == 0, out.stdout + out.stderr
    assert report["exact"] is False and "not deterministic" in report["not_exact"]
    assert "the trainer is not deterministic" in out.stdout
    assert "compared statistically only, never exactly" in out.stdout
    v = _verdicts(report)
    assert ("baseline", "losses") not in v
    assert v[("performance", "trainer_tokens_per_s")] == "pass", out.stdout
    assert all(x == "pass" for x in v.values()), v

    # Planted: every step three times as slow; the losses are the same (up to the noise).
    code = (tmp_path / "tiny.py").read_text()
    (tmp_path / "tiny.py").write_text(code.replace("SLOW = 1", "SLOW = 3"))
    out, report = _bench(tmp_path, "tiny.toml", capsys)
    assert out.returncode == 1, out.stdout + out.stderr
    v = _verdicts(report)
    assert v[("performance", "trainer_tokens_per_s")] == "regressed", out.stdout
    assert [k for k, x in v.items() if x != "pass"] == [("performance", "trainer_tokens_per_s")]
    speed = next(j for j in report["verdicts"] if j["metric"] == "trainer_tokens_per_s")
    assert speed["effect"] < -0.5, speed  # about 1/3 of the baseline's tokens/s


@pytest.mark.parametrize("edit, expect", [
    (lambda s: s.replace(TINY_COMMAND, "commands" + TINY_COMMAND[7:]),
     "trainer.commands = [" + PY),
    (lambda s: s.replace(TINY_COMMAND, ""), "trainer.command: missing: give the command "
                                             "each seed runs"),
    (lambda s: s.replace(TINY_COMMAND, 'command = "python tiny.py {params}"'),
     "unknown macro {params}"),
    (lambda s: s.replace("level = 0.25", "level = 0.25\ndeterministic = \"maybe\""),
     "bench.deterministic = 'maybe': must be true, false or \"check\""),
    (lambda s: s.replace('tokens_per_s = "tokens_per_s"', "tokens_per_s = 3"),
     "bench.perf.tokens_per_s = 3: must be the name of a column of the trainer's log"),
    (lambda s: s.replace('tokens_per_s = "tokens_per_s"', "overhead_steps = 150"),
     "bench.perf.overhead_steps = 150: measures spikebench's built-in engine, not a "
     "[trainer]"),
    (lambda s: s.replace("trainer_tokens_per_s = 0.3", "overhead_ratio = 0.3"),
     "'overhead_ratio' is the built-in engine's ratio, not a [trainer]'s (allowed: "
     "trainer_tokens_per_s, trainer_step_s)"),
    (lambda s: s.replace('tokens_per_s = "tokens_per_s"', 'speed = "x"'),
     "unknown key 'bench.perf.speed' (allowed with a [trainer]: tokens_per_s, step_s, "
     "tolerance)"),
])
def test_bad_trainer_suite_input_is_one_line(tmp_path, capsys, edit, expect):
    (tmp_path / "tiny.py").write_text(TINY)
    (tmp_path / "s.toml").write_text(edit(TINY_SUITE))
    assert main(["bench", "--suite", str(tmp_path / "s.toml"), "--update-baseline",
                 "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expect in err, err
    assert not (tmp_path / "r").exists()  # refused before anything ran


BUILT_IN = """
[study]
name = "tiny"
target_loss = 4.5
seeds = [0, 1, 2, 3]
[config]
model.preset = "gpt-tiny"
train.steps = 30
[comparison]
recipe = false
[bench]
level = 0.2
[bench.perf]
overhead_steps = 0
sweep_trials = 0
report_trials = 0
"""


@pytest.mark.parametrize("old, new, expect", [
    ("level = 0.2", "level = 0.2\ndeterministic = false",
     "bench.deterministic = false: only for a suite with a [trainer] (the built-in engine is "
     "deterministic on one environment"),
    ("report_trials = 0", 'report_trials = 0\ntokens_per_s = "tok"',
     "unknown key 'bench.perf.tokens_per_s' is a [trainer] suite's (its log's column)"),
    ("report_trials = 0", "report_trials = 0\ntolerance = { trainer_step_s = 0.1 }",
     "'trainer_step_s' is a [trainer] suite's ratio, not the built-in engine's"),
])
def test_trainer_keys_in_a_built_in_suite_are_one_line(tmp_path, capsys, old, new, expect):
    (tmp_path / "s.toml").write_text(BUILT_IN.replace(old, new))
    assert main(["bench", "--suite", str(tmp_path / "s.toml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expect in err, err


def test_a_log_column_that_is_not_there_is_one_line_before_any_baseline(tmp_path, capsys):
    (tmp_path / "tiny.py").write_text(TINY)
    (tmp_path / "tiny.toml").write_text(TINY_SUITE.replace('tokens_per_s = "tokens_per_s"',
                                                           'tokens_per_s = "tok_s"'))
    out, _ = _bench(tmp_path, "tiny.toml", capsys, "--update-baseline")
    assert out.returncode == 2, out.stdout + out.stderr
    last = out.stderr.strip().splitlines()[-1]  # after the sweep's progress lines
    assert last.startswith("spikebench bench: error: ") and (
        "bench.perf.tokens_per_s = 'tok_s': not a column of the trainer's log (scenario "
        "'baseline', seed 0: log.csv has the columns 'step', 'loss', 'val_loss', "
        "'tokens_per_s')") in last, last
    assert not (tmp_path / "base.json").exists()
