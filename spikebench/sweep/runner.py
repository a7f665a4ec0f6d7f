"""One sweep trial in a fresh process: ``python -m spikebench.sweep.runner TRIAL_DIR``.

Reads ``TRIAL_DIR/trial.json`` (``{"config": <resolved config>, "seeds": [...]}``), trains
every seed into ``TRIAL_DIR/seed-<n>/`` and writes ``TRIAL_DIR/result.json`` atomically.
A retry of an interrupted trial takes over each seed the old one finished and resumes each
one it checkpointed, instead of step 0 (``carried_over``: what the trial took over from the
old trial's folder before it started this process). With ``train.nproc`` > 1 this runs
under torchrun (:mod:`spikebench.train.launch`), one process per rank.
While seed index 0 trains, each validation loss is printed to stdout as one JSON line
(``{"seed": 0, "step": 50, "val/loss": 2.9}``) so the driver can prune. Each seed is
claimed before it trains (:mod:`.claims`): ``runner --help-trial TRIAL_DIR`` is a helper an
idle worker starts, which trains the trial's unclaimed seeds from the last; the trial's
process waits for those and takes over any whose helper died. A fresh process per
trial means no memory creep across trials, and a crash or an out-of-memory kill costs one
trial, never the sweep. The process ends itself if the driver that started it dies.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

from spikebench import config as cfgmod
from spikebench import metrics as M
from spikebench.runio import atomic_write_json, die_with_parent, parent_pid
from spikebench.study import layout as L
from spikebench.sweep import claims
from spikebench.train.sinks import Sink


class _ParentWatch(Sink):
    """Fallback to PDEATHSIG: stop when re-parented (the driver is gone)."""

    def __init__(self, parent: int):
        self.parent = parent

    def write(self, metrics):
        if os.getppid() != self.parent:
            os._exit(3)


class _Report(Sink):
    """Streams the first seed's validation losses to the driver for pruning."""

    def __init__(self, seed: int):
        self.seed = seed

    def write(self, metrics):
        if M.VAL_LOSS in metrics and metrics[M.STEP] > 0:
            print(json.dumps({"seed": self.seed, M.STEP: metrics[M.STEP],
                              M.VAL_LOSS: metrics[M.VAL_LOSS]}), flush=True)


def carry_over(src: Path | None, dst: Path) -> str:
    """Take over a seed of the trial this one retries: "done" (its summary stands),
    "resume" (continue from its checkpoints) or "" (train from step 0). The trial does this
    before it starts the process, so every rank of a data-parallel trial agrees."""
    if src is None or not src.is_dir() or dst.exists():
        return ""
    if (src / L.SUMMARY_JSON).is_file():
        shutil.copytree(src, dst)
        return "done"
    if (src / "checkpoints").is_dir():
        shutil.copytree(src, dst)
        return "resume"
    return ""


def _train_seed(job: dict, trial_dir: Path, seed: int, parent: int, report: bool,
                main_rank: bool) -> dict:
    """Train (or resume, or take over finished) one seed of the trial: its summary."""
    from spikebench.api.engine_warning import sinks_for
    from spikebench.train.loop import train

    run_dir = trial_dir / L.seed_name(seed)
    how = job.get("carried_over", {}).get(str(seed), "")
    if how == "done":
        return json.loads((run_dir / L.SUMMARY_JSON).read_text())
    cfg = cfgmod.from_dict(job["config"])
    cfg.train.seed = seed
    sinks = [_ParentWatch(parent)] + ([_Report(seed)] if report else []) + sinks_for(cfg)
    # Checkpoints: carried over from the trial this one retries, or left by a dead helper.
    resume = (run_dir / "checkpoints").is_dir()
    return train(cfg, run_dir=run_dir, sinks=sinks if main_rank else [], resume=resume)


def run(trial_dir: Path, parent: int, warm: bool = False) -> int:
    job = json.loads((trial_dir / L.TRIAL_JSON).read_text())
    from spikebench.train.dist import from_env, teardown

    main_rank = from_env().main  # data-parallel: rank 0 reports and writes the result
    helped = job["config"]["train"]["nproc"] == 1  # helpers run single-process trials only
    summaries: dict[int, dict] = {}
    for i, seed in enumerate(job["seeds"]):
        if helped and not claims.claim(trial_dir, seed):
            continue  # a helper has it (spikebench.sweep.claims)
        summaries[seed] = _train_seed(job, trial_dir, seed, parent, i == 0, main_rank)
    for seed in job["seeds"]:  # the helpers' seeds: wait for them, or take them over
        while seed not in summaries:
            done = trial_dir / L.seed_name(seed) / L.SUMMARY_JSON
            if done.is_file():
                summaries[seed] = json.loads(done.read_text())
            elif not claims.claimer_alive(trial_dir, seed):
                claims.take_over(trial_dir, seed)
                summaries[seed] = _train_seed(job, trial_dir, seed, parent, False, main_rank)
            else:
                time.sleep(0.2)
    teardown()
    if main_rank:
        results = [{"seed": s, "summary": summaries[s],
                    "carried_over": job.get("carried_over", {}).get(str(s), "")}
                   for s in job["seeds"]]
        atomic_write_json(trial_dir / L.RESULT_JSON, {"seeds": results, "warm": warm})
    return 0


def help_trial(trial_dir: Path, parent: int) -> int:
    """A helper: train the trial's unclaimed seeds, from the last, until none is left."""
    job = json.loads((trial_dir / L.TRIAL_JSON).read_text())
    for seed in reversed(claims.helpable(job["seeds"])):
        if claims.claim(trial_dir, seed):
            _train_seed(job, trial_dir, seed, parent, False, True)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # A rank of a data-parallel trial watches torchrun's agent (spikebench.train.launch
    # sets this to its own pid), which watches the driver.
    parent = parent_pid()
    if not die_with_parent():
        return 3
    if argv[0] == "--wait":  # a warm spare (spikebench.sweep.spares): import, then wait
        import torch

        import spikebench.train.loop  # noqa: F401 - torch and the loop, before the trial

        # The first op on the meta device loads torch's reference ops (about a second):
        # the preflight builds the model there, so pay for it while waiting.
        torch.empty(1, device="meta").normal_()

        line = sys.stdin.readline().strip()
        if not line:
            return 0  # the sweep ended without a trial for it
        trial_dir = Path(line)
        err = os.open(trial_dir / L.STDERR, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(err, 2)
        os.close(err)  # fd 2 (and so sys.stderr) now writes to the trial's stderr.log
        return run(trial_dir, parent, warm=True)
    if argv[0] == "--help-trial":
        return help_trial(Path(argv[1]), parent)
    if "TORCHELASTIC_RUN_ID" in os.environ:  # a rank's exception, for the agent's one line
        from torch.distributed.elastic.multiprocessing.errors import record

        return record(run)(Path(argv[0]), parent)
    return run(Path(argv[0]), parent)


if __name__ == "__main__":
    sys.exit(main())
