"""The committed example report (``reports/example-default/``) and the study it is written
from, regenerated together (``make example-report``) so the two cannot drift apart.

``python -m spikebench.report.example RESULTS_DIR EXAMPLE_DIR`` copies what the report reads
of a finished sweep (the Optuna study, each trial's ``trial.json``/``result.json`` and each
seed's config, meta, summary and metrics log; no checkpoints, claims or logs) into
``EXAMPLE_DIR/study`` and writes the report beside it. ``tests/report/test_example_report.py``
rewrites the report from that study with the current code and fails where its sections,
headings, tables of verdicts or claims differ from the committed one.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from spikebench.study import layout as L

TRIAL_FILES = (L.TRIAL_JSON, L.RESULT_JSON)
SEED_FILES = (L.CONFIG_JSON, L.META_JSON, L.SUMMARY_JSON, L.METRICS)


def keep(results_dir: Path, study_dir: Path) -> None:
    """Copy the files the report reads from ``results_dir`` into a fresh ``study_dir``."""
    if study_dir.exists():
        shutil.rmtree(study_dir)
    (study_dir / L.TRIALS).mkdir(parents=True)
    shutil.copy2(results_dir / L.STUDY_DB, study_dir / L.STUDY_DB)
    for trial in sorted((results_dir / L.TRIALS).iterdir()):
        if not trial.is_dir():
            continue
        dest = study_dir / L.TRIALS / trial.name
        dest.mkdir()
        for name in TRIAL_FILES:
            if (trial / name).is_file():
                shutil.copy2(trial / name, dest / name)
        for seed in sorted(trial.glob(L.SEED_PREFIX + "*")):
            if not seed.is_dir():
                continue
            (dest / seed.name).mkdir()
            for name in SEED_FILES:
                if (seed / name).is_file():
                    shutil.copy2(seed / name, dest / seed.name / name)
    for path in study_dir.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)


def main(argv: list[str]) -> int:
    from spikebench.report import build_report

    if len(argv) != 2:
        print("usage: python -m spikebench.report.example RESULTS_DIR EXAMPLE_DIR",
              file=sys.stderr)
        return 2
    results, example = Path(argv[0]), Path(argv[1])
    keep(results, example / "study")
    paths = build_report(example / "study", example)
    print(f"example: {example / 'study'} and {paths['markdown']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
