"""What the precursor probes cost: ``spikebench train`` with probes every K steps against the
same run with none, as whole processes, in CPU seconds.

Each pair runs ``spikebench train --set train.probe_every=K`` and the same with probes off
(every 10^6 steps), in alternating order after a warm-up pair, and reads each child's CPU
time (user + system, ``RUSAGE_CHILDREN``: what other work on a shared machine does not
lengthen). Prints the ratio of mean CPU times with its exact 95% sign-flip interval over
the pairs. Evaluation is at the last step only, in both.

    python benchmarks/probe_cost.py --every 2 --steps 200 --pairs 6
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile

from spikes_speed import one_process  # a child's wall and CPU seconds

from spikebench.report.exact import relative_interval


def _cpu(argv: list[str]) -> float:
    return one_process(argv)[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=int, default=2)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--preset", default="gpt-tiny")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as out:
        def argv(every: int) -> list[str]:
            return [sys.executable, "-m", "spikebench", "train", "--set",
                    f"model.preset={args.preset}", "--set", f"train.steps={args.steps}",
                    "--set", f"train.eval_every={args.steps}", "--set",
                    f"train.probe_every={every}", "--set", "train.progress=false",
                    "--set", f"run.out_dir={out}"]
        on, off = [], []
        _cpu(argv(args.every)), _cpu(argv(10 ** 6))  # the warm-up pair
        for i in range(args.pairs):
            order = ((on, args.every), (off, 10 ** 6))
            for times, every in (order if i % 2 == 0 else order[::-1]):
                times.append(_cpu(argv(every)))
    ci = relative_interval(on, off)
    a, b = statistics.fmean(on), statistics.fmean(off)
    print(f"{args.preset}, {args.steps} steps, {args.pairs} pairs, CPU seconds per run: probes "
          f"every {args.every}: {a:.2f} (" + ", ".join(f"{x:.2f}" for x in on) + f"); none: "
          f"{b:.2f} (" + ", ".join(f"{x:.2f}" for x in off) + ")")
    interval = (f"no interval: {ci.why}" if ci.lo is None
                else f"95% interval {1 + ci.lo:.3f} to {1 + ci.hi:.3f}, {ci.method}")
    print(f"CPU-time ratio, probes every {args.every} / none: {a / b:.3f} ({interval})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
