"""One sweep trial in a fresh process: ``python -m spikebench.sweep.runner TRIAL_DIR``.

Reads ``TRIAL_DIR/trial.json`` (``{"config": <resolved config>, "seeds": [...]}``), trains
every seed into ``TRIAL_DIR/seed-<n>/`` and writes ``TRIAL_DIR/result.json`` atomically.
A retry of an interrupted trial takes over each seed the old one finished and resumes each
one it checkpointed, instead of step 0 (``carried_over``: what the trial took over from the
old trial's folder before it started this process). With ``train.nproc`` > 1 this runs
under torchrun (:mod:`spikebench.train.launch`), one process per rank.
While seed index 0 trains, each validation loss is printed to stdout as one JSON line
(``{"seed": 0, "step": 50, "val/loss": 2.9}``) so the driver can prune. A fresh process per
trial means no memory creep across trials, and a crash or an out-of-memory kill costs one
trial, never the sweep. The process ends itself if the driver that started it dies.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from spikebench import config as cfgmod
from spikebench import metrics as M
from spikebench.runio import atomic_write_json, die_with_parent, parent_pid
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
    if (src / "summary.json").is_file():
        shutil.copytree(src, dst)
        return "done"
    if (src / "checkpoints").is_dir():
        shutil.copytree(src, dst)
        return "resume"
    return ""


def run(trial_dir: Path, parent: int, warm: bool = False) -> int:
    job = json.loads((trial_dir / "trial.json").read_text())
    from spikebench.train.dist import from_env, teardown
    from spikebench.train.loop import train  # torch imports after the watch is set

    main_rank = from_env().main  # data-parallel: rank 0 reports and writes the result
    results = []
    for i, seed in enumerate(job["seeds"]):
        cfg = cfgmod.from_dict(job["config"])
        cfg.train.seed = seed
        run_dir = trial_dir / f"seed-{seed}"
        how = job.get("carried_over", {}).get(str(seed), "")
        if how == "done":
            summary = json.loads((run_dir / "summary.json").read_text())
        else:
            sinks = [_ParentWatch(parent)] + ([_Report(seed)] if i == 0 else [])
            summary = train(cfg, run_dir=run_dir, sinks=sinks if main_rank else [],
                            resume=how == "resume")
        results.append({"seed": seed, "summary": summary, "carried_over": how})
    teardown()
    if main_rank:
        atomic_write_json(trial_dir / "result.json", {"seeds": results, "warm": warm})
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # A rank of a data-parallel trial watches torchrun's agent (spikebench.train.launch
    # sets this to its own pid), which watches the driver.
    parent = parent_pid()
    if not die_with_parent():
        return 3
    if argv[0] == "--wait":  # a warm spare (spikebench.sweep.spares): import, then wait
        import spikebench.train.loop  # noqa: F401 - torch and the loop, before the trial

        line = sys.stdin.readline().strip()
        if not line:
            return 0  # the sweep ended without a trial for it
        trial_dir = Path(line)
        err = os.open(trial_dir / "stderr.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(err, 2)
        os.close(err)  # fd 2 (and so sys.stderr) now writes to the trial's stderr.log
        return run(trial_dir, parent, warm=True)
    if "TORCHELASTIC_RUN_ID" in os.environ:  # a rank's exception, for the agent's one line
        from torch.distributed.elastic.multiprocessing.errors import record

        return record(run)(Path(argv[0]), parent)
    return run(Path(argv[0]), parent)


if __name__ == "__main__":
    sys.exit(main())
