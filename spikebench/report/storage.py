"""Opening a study's SQLite storage read-only, and refusing one Optuna would have to repair.

Optuna's RDB storage writes its schema into an empty file and recreates a dropped table; a
report must change nothing, so the file is checked through a read-only connection first
and Optuna is handed one too.
"""

from __future__ import annotations

import atexit
import shutil
import sqlite3
import tempfile
from pathlib import Path

from spikebench.errors import UserError
from spikebench.study import layout as L

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
    db = results_dir / L.STUDY_DB
    if not db.is_file():
        hint = ""
        subs = sorted(str(p.parent) for p in results_dir.glob("*/" + L.STUDY_DB) if p.is_file())
        if subs:
            more = f" and {len(subs) - 3} more" if len(subs) > 3 else ""
            hint = f" (give a study folder below it: {', '.join(subs[:3])}{more})"
        raise UserError(f"{results_dir}: no study.db{hint}")
    return db


def _wal_mode(db: Path) -> bool:
    """Whether ``db`` is an SQLite file in write-ahead-log mode (header bytes 18-19 are 2)."""
    try:
        with open(db, "rb") as f:
            head = f.read(20)
    except OSError:
        return False
    return head[:16] == b"SQLite format 3\x00" and len(head) == 20 and 2 in (head[18], head[19])


_COPIES: dict[tuple, Path] = {}


def _stamp(p: Path) -> tuple:
    try:
        st = p.stat()
        return st.st_size, st.st_mtime_ns
    except OSError:
        return ()


def readable(db: Path) -> Path:
    """The file a report opens: ``db`` itself, or for a WAL-mode one a private copy (with
    its ``-wal`` folded in) in a temporary folder removed at exit. Even a read-only
    connection to a WAL-mode file creates ``-wal`` and ``-shm`` files beside it and writes
    read marks into the ``-shm``; a report leaves the results folder byte-identical."""
    if not _wal_mode(db):
        return db
    wal = db.with_name(db.name + "-wal")
    key = (str(db.resolve()), _stamp(db), _stamp(wal))
    if key in _COPIES and _COPIES[key].is_file():
        return _COPIES[key]
    tmp = Path(tempfile.mkdtemp(prefix="spikebench-report-"))
    atexit.register(shutil.rmtree, tmp, True)
    copy = tmp / L.STUDY_DB
    shutil.copyfile(db, copy)
    if wal.is_file():
        shutil.copyfile(wal, tmp / (L.STUDY_DB + "-wal"))
    con = sqlite3.connect(copy)  # our own copy: fold its log in, out of WAL mode
    try:
        con.execute("PRAGMA journal_mode=DELETE")
    finally:
        con.close()
    _COPIES[key] = copy
    return copy


def read_only(db: Path) -> sqlite3.Connection:
    # mode=ro: SQLite itself refuses every write, whatever Optuna or SQLAlchemy try. The
    # timeout waits for a sweep that is writing the file right now, rather than failing.
    return sqlite3.connect(f"{readable(db).resolve().as_uri()}?mode=ro", uri=True,
                           timeout=60, check_same_thread=False)


def check_storage(db: Path) -> None:
    """Refuse a file that is not a whole Optuna storage before Optuna sees it: Optuna would
    write its schema into an empty file and recreate a dropped table."""
    try:
        con = read_only(db)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
        finally:
            con.close()
    except (sqlite3.Error, OSError) as e:
        raise UserError(f"{db}: cannot read the Optuna storage ({e})") from None
    missing = [t for t in OPTUNA_TABLES if t not in tables]
    if not tables:
        raise UserError(f"{db}: cannot read the Optuna storage (an empty database, with none "
                        "of Optuna's tables)")
    if missing:
        raise UserError(f"{db}: cannot read the Optuna storage (no table {', '.join(missing)}"
                        "; a report does not repair a storage)")
