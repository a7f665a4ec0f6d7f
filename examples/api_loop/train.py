"""A training loop reporting through spikebench's run API (a few lines), pruned by a sweep.

The "model" is a simulated loss curve, so the example runs in a second: a learning rate
sets how fast the loss falls. Inside a sweep trial ``spikebench.init()`` gets the trial's
parameters, seed and run folder from the environment; each ``run.log`` returns a decision,
and ``PRUNE`` ends the run early when the sweep prunes the trial. See README.md.

    python train.py            # outside a sweep: a run folder under results/runs/
"""

import math
import random
import time

import spikebench


def main():
    run = spikebench.init(params={"lr": 0.05, "steps": 60, "eval_every": 10, "sleep_s": 0.0,
                                  "spike_at": 0})
    p, rng = run.params, random.Random(run.seed)
    for step in range(1, int(p["steps"]) + 1):
        loss = 2.0 + 2.0 * math.exp(-p["lr"] * step) + 0.01 * rng.random()
        if p["spike_at"] and p["spike_at"] <= step < p["spike_at"] + 2:
            loss *= 2  # a planted two-step loss spike
        val = loss + 0.05 if step % int(p["eval_every"]) == 0 else None
        decision = run.log(step, loss=loss, grad_norm=1.0 + 0.01 * rng.random(), val_loss=val)
        if decision == spikebench.Decision.SPIKE:  # a real loop might roll back here
            print(f"spike at step {run.last_report.onset}", flush=True)
        if decision == spikebench.Decision.PRUNE:
            run.finish("pruned")
            return
        time.sleep(float(p["sleep_s"]))  # stands for a real step's work
    run.finish()


if __name__ == "__main__":
    main()
