"""Opening a study's storage by its URL for a report: reading only.

Optuna's RDB storage creates its tables in an empty database and upgrades an old schema;
a report must write nothing, so the tables are looked for first, and Optuna is told to
create none. A URL's password is never printed (:func:`~spikebench.sweep.storage.mask_url`).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import optuna

from spikebench.errors import UserError
from spikebench.report.storage import OPTUNA_TABLES
from spikebench.sweep.storage import check_storage, driver_url, mask_url


def _first_line(e: BaseException) -> str:
    chain = [e]
    while chain[-1].__cause__ is not None and len(chain) < 8:
        chain.append(chain[-1].__cause__)
    text = str(chain[-1]).strip() or str(e).strip()
    return (text.splitlines() or [type(e).__name__])[0]


def open_storage(url: str) -> tuple[optuna.storages.BaseStorage, str]:
    """The storage at ``url`` opened to read, and the URL as it may be printed."""
    import sqlalchemy

    check_storage(url)
    shown = mask_url(url)
    db = sqlalchemy.engine.make_url(url).database if url.startswith("sqlite") else None
    if db and not Path(db).is_file():  # SQLite would make an empty file of it
        raise UserError(f"--storage {shown}: no such file {db}")
    engine = None
    try:
        engine = sqlalchemy.create_engine(driver_url(url), connect_args=_connect_args(url))
        tables = set(sqlalchemy.inspect(engine).get_table_names())
    except Exception as e:  # noqa: BLE001 - drivers raise their own errors
        raise UserError(f"--storage {shown}: cannot connect ({_first_line(e)})") from None
    finally:
        if engine is not None:
            engine.dispose()
    missing = [t for t in OPTUNA_TABLES if t not in tables]
    if missing:
        what = ("an empty database" if not tables else
                f"no table {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}")
        raise UserError(f"--storage {shown}: not an Optuna storage ({what}); a report "
                        "changes nothing in it")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            storage = optuna.storages.RDBStorage(driver_url(url), skip_table_creation=True,
                                                 skip_compatibility_check=True)
    except Exception as e:  # noqa: BLE001
        raise UserError(f"--storage {shown}: cannot open ({_first_line(e)})") from None
    return storage, shown


def _connect_args(url: str) -> dict:
    # A server that does not answer is a one-line error within seconds, not a hang.
    return {"connect_timeout": 10} if url.startswith(("postgres", "mysql")) else {}
