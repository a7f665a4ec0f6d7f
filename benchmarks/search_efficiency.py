"""Search efficiency at equal compute: a grid, TPE, and TPE with the spike-tolerant pruner.

Each method searches the LR (log-uniform, 1e-4 to 0.3) of one single-objective sweep:
gpt-tiny, 150 steps, evaluation every 20, one training seed per trial, through the real
sweep driver. The grid runs ``--grid`` log-spaced LRs; its training steps are the compute
budget C. TPE runs as many trials as the grid; TPE with pruning runs more, as many as fit in
C. A pruned trial costs the steps it ran. For fractions of C, the table prints the best
value found with at most that much compute (the sweep's convergence score: steps to the
target loss when reached, 1-2x the budget when missed; lower is better), the median over
``--sampler-seeds`` sampler seeds, and the compute pruning saved.

    python benchmarks/search_efficiency.py                    # 16-point grid, 3 seeds
    python benchmarks/search_efficiency.py --grid 8 --sampler-seeds 2 --jobs 2
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from pathlib import Path

import optuna
from optuna.trial import TrialState

from spikebench.sweep.driver import run_sweep
from spikebench.sweep.spec import load_sweep
from spikebench.sweep.storage import default_storage

STEPS = 150
SWEEP = """[study]
name = "{name}"
objective = "single"
target_loss = {target}
seeds = [0]
trials = {trials}
sampler = "{sampler}"
sampler_seed = {seed}
pruner = "{pruner}"

[config]
model.preset = "gpt-tiny"
data.max_bytes = 1000000
train.steps = {steps}
train.eval_every = 20
train.eval_batches = 2
optim.lr = {base_lr}

[space]
"optim.lr" = {{ low = 1e-4, high = 0.3, log = true }}

[comparison]
recipe = false
{grid}
"""


def _grid(n: int) -> list[float]:
    return [float(f"{10 ** (math.log10(1e-4) + i * math.log10(3e3) / (n - 1)):.3g}")
            for i in range(n)]


def _run(root: Path, name: str, jobs: int, **fields) -> list[optuna.trial.FrozenTrial]:
    path = root / f"{name}.toml"
    path.write_text(SWEEP.format(name=name, steps=STEPS, **fields))
    run_sweep(load_sweep(path), results=root, jobs=jobs, log=lambda s: None)
    study = optuna.load_study(study_name=name, storage=default_storage(root / name))
    return sorted(study.get_trials(), key=lambda t: t.datetime_complete or t.datetime_start)


def _curve(trials, budget: int) -> tuple[list[tuple[int, float]], int, int]:
    """(steps spent, best value so far) after each trial within ``budget``; trials run;
    steps the pruned ones did not run."""
    spent, best, out, saved, n = 0, math.inf, [], 0, 0
    for t in trials:
        cost = int(t.user_attrs.get("pruned_at_step", STEPS)) if (
            t.state == TrialState.PRUNED) else STEPS
        if spent + cost > budget:
            break
        spent, n = spent + cost, n + 1
        saved += STEPS - cost
        if t.state == TrialState.COMPLETE and t.values:
            best = min(best, t.values[0])
        out.append((spent, best))
    return out, n, saved


def _best_at(curve, steps: int) -> float:
    return min((b for s, b in curve if s <= steps), default=math.inf)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", type=int, default=16)
    ap.add_argument("--sampler-seeds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--target", type=float, default=2.6)
    ap.add_argument("--extra", type=float, default=2.0,
                    help="TPE with pruning gets this many times the grid's trial count")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    grid = _grid(args.grid)
    base = grid[len(grid) * 2 // 3]
    budget = args.grid * STEPS
    fractions = (0.25, 0.5, 0.75, 1.0)
    rows: dict[str, list] = {}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        common = {"target": args.target, "base_lr": base}
        trials = _run(root, "grid", args.jobs, trials=0, sampler="tpe", seed=0,
                      pruner="none", grid=f'grid = {{ "optim.lr" = {grid} }}', **common)
        rows["grid"] = [_curve(trials, budget)]
        for seed in range(args.sampler_seeds):
            for label, pruner, n in (("tpe", "none", args.grid),
                                     ("tpe + pruning", "spike_tolerant_hyperband",
                                      int(args.grid * args.extra))):
                trials = _run(root, f"{label.replace(' + ', '-')}-{seed}", args.jobs,
                              trials=n - 1, sampler="tpe", seed=seed, pruner=pruner,
                              grid="", **common)
                rows.setdefault(label, []).append(_curve(trials, budget))
    took = time.perf_counter() - start
    print(f"LR search, gpt-tiny, {STEPS} steps, target {args.target}; compute C = "
          f"{args.grid} x {STEPS} = {budget} steps; median over {args.sampler_seeds} sampler "
          "seed(s) (the grid has none)")
    print("| method | " + " | ".join(f"best at {f:.0%} C" for f in fractions)
          + " | trials within C | steps pruning saved |")
    print("|---|" + "---|" * (len(fractions) + 2))
    for label, runs in rows.items():
        cells = []
        for f in fractions:
            vals = [_best_at(curve, int(f * budget)) for curve, _, _ in runs]
            med = statistics.median(vals)
            cells.append("none" if math.isinf(med) else f"{med:.0f}")
        n = statistics.median(r[1] for r in runs)
        saved = statistics.median(r[2] for r in runs)
        print(f"| {label} | " + " | ".join(cells) + f" | {n:g} | {saved:g} |")
    print(f"({took:.0f} s)")


if __name__ == "__main__":
    main()
