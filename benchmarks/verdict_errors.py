"""How often each verdict is given when the true effect is known: simulated arms judged by
the report's own code (spikebench.report.error_rates), per measure, seeds, true effect (as
a share of the claim) and family size (1: one claim alone; 2: the example's family of two
judged claims, each interval at 97.5%).

    python benchmarks/verdict_errors.py [--reps 2000] [--seed 0]

Prints one row per case: the share called supported, real (any verdict that excludes no
change) and each other verdict. docs/reports.md quotes the figures.
"""

from __future__ import annotations

import argparse
import time

from spikebench.report import error_rates, verdicts

CLAIMS = {"time": -0.25, "success": 0.40}  # the article's headline claims
SHARES = (0.0, 0.6, 0.8, 1.5)  # the true effect as a share of the claim


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2000, help="simulated comparisons per case")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    started = time.perf_counter()
    short = {verdicts.CONSISTENT: "consistent", verdicts.SMALLER: "smaller",
             verdicts.INCONCLUSIVE: "inconcl.", verdicts.NOT_SUPPORTED: "not supp.",
             verdicts.OPPOSITE: "opposite"}
    print(f"{args.reps} simulated comparisons per row; time: log-normal times, median 200, "
          f"seed log-sd {error_rates.TimeModel.seed_sd}, noise log-sd "
          f"{error_rates.TimeModel.noise_sd}; success: baseline rate 0.5, seeds independent")
    print("| measure | claim | true effect | seeds | family | supported | real | "
          + " | ".join(short.values()) + " |")
    print("|---" * (7 + len(short)) + "|")
    for measure, claimed in CLAIMS.items():
        for n in (6, 12):
            for family in (1, 2):
                for share in SHARES:
                    r = error_rates.rates(measure, n, share * claimed, claimed, args.reps,
                                          seed=args.seed, family=family)
                    cells = [f"{100 * r[k]:.1f}%" for k in short]
                    print(f"| {measure} | {claimed:+.0%} | {share * claimed:+.0%} "
                          f"({share:.0%} of the claim) | {n} | {family} | "
                          f"{100 * r[verdicts.SUPPORTED]:.1f}% | {100 * r['real']:.1f}% | "
                          + " | ".join(cells) + " |", flush=True)
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
