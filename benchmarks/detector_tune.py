"""Tune the default rule's multi-step parameters on the development split, with Optuna.

Two objectives on the labelled real traces of ``detector_labelled.py`` (development split
only; the held-out and fresh splits are never seen here): F1, maximised, and false alarms
per 10,000 clean rows, minimised. One constraint: on the synthetic logs of
``tests/spikes/test_synthetic.py`` (its first 10 seeds, loss and grad norm) precision and
recall stay >= 0.96 and false alarms <= 0.7 per 10k, a margin on that acceptance test.
Prints the Pareto front of the feasible trials and the one with the best F1 at or under
``--max-fa`` false alarms. The default rule's parameters were chosen by

    python benchmarks/detector_tune.py --trials 600 --jobs 2

in a run with three more switches (set to: no hard noise threshold, MAD not RMS noise, the
differences within the spike counted; then removed) and with the first 200 steps still
counted, so rerunning it finds a nearby trial, not the same one. They were then checked
once on the held-out splits (``python benchmarks/detector_labelled.py``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import joblib
import optuna
from detector_labelled import load_traces, logs_of, run
from optuna.storages.journal import JournalFileBackend, JournalStorage
from tabulate import tabulate

from spikebench.spikes.monitor import SpikeMonitor
from spikebench.spikes.synthetic import Match, evaluate, generate

SYNTHETIC = [generate(seed, 10_000) for seed in range(10)]


def synthetic(kwargs: dict) -> Match:
    """The default rule with ``kwargs`` on the synthetic acceptance logs."""
    total = Match()
    for lg in SYNTHETIC:
        mon = SpikeMonitor("default", ("loss", "grad_norm"), rule_kwargs=kwargs)
        for r in lg.records("loss", "grad_norm"):
            mon.update(r["step"], r)
        mon.finish()
        total += evaluate(mon.events, lg)
    return total


def space(trial: optuna.Trial) -> dict:
    """The multi-step parameters of :class:`spikebench.spikes.rules.DefaultRule`."""
    return {
        "k_peak": trial.suggest_float("k_peak", 4.0, 6.0),
        "k_multi": trial.suggest_float("k_multi", 5.0, 8.0),
        "k_big": trial.suggest_float("k_big", 6.0, 10.0),
        "k_noise": trial.suggest_float("k_noise", 1.2, 2.2),
        "open": trial.suggest_float("open", 1.5, 3.0),
        "confirm": trial.suggest_int("confirm", 4, 10),
        "back": trial.suggest_float("back", 0.3, 1.0),
        "max_len": trial.suggest_categorical("max_len", [24, 32, 48, 64]),
        "post": trial.suggest_categorical("post", [8, 12, 16, 24]),
        "pre": trial.suggest_categorical("pre", [16, 24, 32]),
        "drop": trial.suggest_float("drop", 0.5, 3.0),
        "decay": trial.suggest_float("decay", 0.4, 0.9),
        "k_decay": trial.suggest_float("k_decay", 2.0, 5.0),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="results/detector-traces")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--copies", type=int, default=24, help="planted logs per trace")
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0, help="sampler seed")
    ap.add_argument("--max-fa", type=float, default=1.0)
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--journal", default="results/detector-tune.journal",
                    help="Optuna journal file; an existing one is replaced")
    args = ap.parse_args()
    journal = Path(args.journal)
    journal.parent.mkdir(parents=True, exist_ok=True)
    journal.unlink(missing_ok=True)
    storage = JournalStorage(JournalFileBackend(str(journal)))
    study = optuna.create_study(study_name="detector", storage=storage,
                                directions=["maximize", "minimize"])
    per = [args.trials // args.jobs + (i < args.trials % args.jobs) for i in range(args.jobs)]
    joblib.Parallel(n_jobs=args.jobs)(
        joblib.delayed(tune)(args, str(journal), args.seed + i, n) for i, n in enumerate(per))
    study = optuna.load_study(study_name="detector", storage=storage)
    front = sorted(study.best_trials, key=lambda t: t.values[1])
    print(tabulate([[t.number, f"{t.values[0]:.3f}", f"{t.values[1]:.2f}",
                     *t.user_attrs["bands"],
                     " / ".join(f"{x:.2f}" for x in t.user_attrs["synthetic"])]
                    for t in front],
                   ["trial", "F1", "false alarms / 10k", "3-5 sigma", "5-8 sigma",
                    "8-20 sigma", "synthetic P / R / FA"], tablefmt="github"))
    ok = [t for t in front if t.values[1] <= args.max_fa]
    if ok:
        best = max(ok, key=lambda t: t.values[0])
        print(f"\nbest F1 at <= {args.max_fa:g} false alarms / 10k: trial {best.number}")
        print(json.dumps(best.params, indent=1))


def tune(args: argparse.Namespace, journal: str, sampler_seed: int, n_trials: int) -> None:
    """One worker: ``n_trials`` trials of the shared study, its sampler seeded as given."""
    logs = logs_of(load_traces(args.traces, args.steps, ["dev"]), "dev", args.copies)

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        kwargs = space(trial)
        m, bands, _, _ = run("default", kwargs, logs)
        s = synthetic(kwargs)
        trial.set_user_attr("bands", [f"{f}/{n}" for n, f in bands])
        trial.set_user_attr("synthetic", [s.precision, s.recall, s.fa_per_10k])
        trial.set_constraint("synthetic precision", 0.96 - s.precision)
        trial.set_constraint("synthetic recall", 0.96 - s.recall)
        trial.set_constraint("synthetic false alarms", s.fa_per_10k - 0.7)
        return m.f1, m.fa_per_10k

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name="detector",
                              storage=JournalStorage(JournalFileBackend(journal)),
                              sampler=optuna.samplers.TPESampler(seed=sampler_seed))
    study.optimize(objective, n_trials=n_trials)


if __name__ == "__main__":
    main()
