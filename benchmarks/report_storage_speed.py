"""How long the report takes from a PostgreSQL storage alone, and how it grows with trials.

    .venv/bin/python benchmarks/report_storage_speed.py [--sizes 250 500 1000] [--steps 300]

For each size: a synthetic study of that many trials x 3 seeds, built with the report
tests' fixture builder (``tests/report/fixtures.py``: the default sweep's arms and search
trials, with trial folders and logs), is copied into a real PostgreSQL server on loopback
(``tests/sweep/pgserver.py``) with the records a finished trial writes
(:func:`spikebench.study.records.attributes`) on each trial. Then ``build_report`` runs from the URL and
study name alone, and its seconds are printed, with seconds per 100 trials (flat: linear
growth). Building and copying are not timed. No assertion: it is a measurement.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "report"), str(ROOT / "tests" / "sweep")]

import optuna  # noqa: E402
from fixtures import ARMS, LR, SPACE, make_study  # noqa: E402
from pgserver import postgres_server  # noqa: E402

from spikebench.report import build_report  # noqa: E402
from spikebench.study import records  # noqa: E402
from spikebench.study.layout import StudyLayout  # noqa: E402
from spikebench.sweep.storage import make_storage  # noqa: E402


def to_postgres(folder: Path, url: str, name: str) -> None:
    """The folder's study copied into ``url`` as ``name``, each trial with the records a
    finished trial leaves (:func:`records.attributes`), added as it was."""
    src = optuna.load_study(study_name=optuna.get_all_study_names(
        f"sqlite:///{folder / 'study.db'}")[0], storage=f"sqlite:///{folder / 'study.db'}")
    dst = optuna.create_study(storage=make_storage(url), study_name=name,
                              directions=src.directions)
    for k, v in src.user_attrs.items():
        dst.set_user_attr(k, v)
    layout = StudyLayout(folder)
    trials = []
    for t in src.get_trials():
        if layout.trial(t.number).is_dir():
            t.system_attrs = {**t.system_attrs, **records.attributes(layout.trial(t.number))}
        trials.append(t)
    dst.add_trials(trials)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1000],
                   help="trials per study (default 250 500 1000)")
    p.add_argument("--steps", type=int, default=300, help="logged steps per seed (default 300)")
    args = p.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rows = []
    with postgres_server() as url, tempfile.TemporaryDirectory(prefix="report-pg-") as tmp:
        for n in args.sizes:
            root = Path(tmp) / str(n)
            t0 = time.perf_counter()
            folder = make_study(root, folder="speed", search=max(0, n - len(ARMS)),
                                space=SPACE + [LR], steps=args.steps)
            to_postgres(folder, url, f"speed-{n}")
            built = time.perf_counter() - t0
            t0 = time.perf_counter()
            paths = build_report(None, root / "report", storage=url, study=f"speed-{n}")
            seconds = time.perf_counter() - t0
            rows.append((n, seconds))
            print(f"{n} trials x 3 seeds: built and copied in {built:.0f} s (not timed); "
                  f"report from PostgreSQL {seconds:.2f} s, {100 * seconds / n:.3f} s per "
                  f"100 trials (report.html {paths['html'].stat().st_size / 1e6:.2f} MB)",
                  flush=True)
    if len(rows) > 1:
        (n0, s0), (n1, s1) = rows[0], rows[-1]
        print(f"growth {n0} -> {n1} trials: x{s1 / s0:.2f} time for x{n1 / n0:.2f} trials")
    return 0


if __name__ == "__main__":
    sys.exit(main())
