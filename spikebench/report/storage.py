"""Opening a study's SQLite storage read-only, and refusing one Optuna would have to repair.

Optuna's RDB storage writes its schema into an empty file and recreates a dropped table; a
report must change nothing, so the file is checked through a read-only connection first
and Optuna is handed one too.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from spikebench.errors import UserError

# Optuna's tables: a file lacking one is refused, as Optuna would create it (a write).
OPTUNA_TABLES = ("studies", "study_directions", "study_user_attributes",
                 "study_system_attributes", "trials", "trial_params", "trial_values",
                 "trial_intermediate_values", "trial_user_attributes",
                 "trial_system_attributes", "trial_heartbeats", "version_info",
                 "alembic_version")


def find_storage(results_dir: Path) -> Path:
    if not results_dir.exists():
        raise UserError(f"{results_dir}: no such folder")
    if not results_dir.is_dir():
        raise UserError(f"{results_dir}: not a folder (give results/<study>)")
    db = results_dir / "study.db"
    if not db.is_file():
        hint = ""
        subs = sorted(str(p.parent) for p in results_dir.glob("*/study.db") if p.is_file())
        if subs:
            more = f" and {len(subs) - 3} more" if len(subs) > 3 else ""
            hint = f" (give a study folder below it: {', '.join(subs[:3])}{more})"
        raise UserError(f"{results_dir}: no study.db{hint}")
    return db


def read_only(db: Path) -> sqlite3.Connection:
    # mode=ro: SQLite itself refuses every write, whatever Optuna or SQLAlchemy try. The
    # timeout waits for a sweep that is writing the file right now, rather than failing.
    return sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=60,
                           check_same_thread=False)


def check_storage(db: Path) -> None:
    """Refuse a file that is not a whole Optuna storage before Optuna sees it: Optuna would
    write its schema into an empty file and recreate a dropped table."""
    try:
        con = read_only(db)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
        finally:
            con.close()
    except sqlite3.Error as e:
        raise UserError(f"{db}: cannot read the Optuna storage ({e})") from None
    missing = [t for t in OPTUNA_TABLES if t not in tables]
    if not tables:
        raise UserError(f"{db}: cannot read the Optuna storage (an empty database, with none "
                        "of Optuna's tables)")
    if missing:
        raise UserError(f"{db}: cannot read the Optuna storage (no table {', '.join(missing)}"
                        "; a report does not repair a storage)")
