"""How long ``build_report`` takes on a 500-trial study (the issue asks for under 15 s).

    .venv/bin/python benchmarks/report_speed.py [--trials 500] [--steps 300]

Builds a synthetic study in a temporary folder with the report tests' fixture builder
(``tests/report/fixtures.py``: a real Optuna SQLite storage, the default sweep's seven
comparison arms, search trials over warmup, clipping, precision, curriculum and the
learning rate, three seeds each, with trial folders and logs), then times one
``build_report`` (loading, every section, the plots, both pages) and prints the seconds.
Building the study itself takes longer than the report (Optuna writes each trial's
attributes one row at a time) and is not timed. No assertion: it is a measurement.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "report"))

from fixtures import ARMS, LR, SPACE, make_study  # noqa: E402

from spikebench.report import build_report  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=500, help="trials in all (default 500)")
    p.add_argument("--steps", type=int, default=300, help="logged steps per seed (default 300)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="report-speed-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        study = make_study(root, folder="speed", search=max(0, args.trials - len(ARMS)),
                           space=SPACE + [LR], steps=args.steps)
        built = time.perf_counter() - t0
        t0 = time.perf_counter()
        paths = build_report(study, root / "report")
        seconds = time.perf_counter() - t0
        size = paths["html"].stat().st_size
    print(f"study of {args.trials} trials x 3 seeds built in {built:.1f} s (not timed)",
          file=sys.stderr)
    print(f"build_report: {seconds:.2f} s (report.html {size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
