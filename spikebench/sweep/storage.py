"""A study's storage: its URL checked, masked and opened, in one place.

Every command that takes ``--storage`` goes through :func:`make_storage` (or, to read only,
:mod:`spikebench.report.remote`): a URL is refused in one line before anything is opened
when it does not parse or names a database that lives only in memory; a server URL opens a
storage whose calls outlast a restart of the database (:mod:`.resilience`); a
``grpc://host:port`` URL a client of the storage proxy (:mod:`.proxy`). Passwords are
printed only masked (:func:`mask_url`). A study's file names are
:mod:`spikebench.study.layout`'s.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import optuna

from spikebench.errors import UserError
from spikebench.study import layout as L
from spikebench.sweep.resilience import RetryingRDBStorage
from spikebench.sweep.spec import STORAGE_RETRY_S


def mask_url(url: str) -> str:
    """``postgresql://u:secret@h/db`` -> ``postgresql://u:***@h/db``; also without a
    scheme (``u:secret@h/db``, a typo that must not print the password either), and a
    ``password=`` query value. A URL with no password (``postgresql://u@h/db``) is unchanged.

    The user info ends at the last ``@``: a password holding ``@`` is masked whole."""
    scheme = re.match(r"[\w+.-]+://", url)
    head = scheme.group(0) if scheme else ""
    rest = url[len(head):]
    if "@" in rest:
        info, host = rest.rsplit("@", 1)
        if ":" in info:
            rest = info.split(":", 1)[0] + ":***@" + host
    return head + re.sub(r"(?i)([?&]password=)[^&]*", r"\1***", rest)


def default_storage(study_dir: Path) -> str:
    return f"sqlite:///{study_dir.resolve() / L.STUDY_DB}"


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite:")


def driver_url(url: str) -> str:
    """``postgresql://`` names no driver, and SQLAlchemy's default changed (psycopg2 in 1.x
    and 2.0, psycopg 3 in 2.1): use whichever of the two is installed."""
    if not url.startswith(("postgresql://", "postgres://")):
        return url
    import importlib.util

    if importlib.util.find_spec("psycopg") is None and importlib.util.find_spec("psycopg2"):
        return "postgresql+psycopg2://" + url.split("://", 1)[1]
    if importlib.util.find_spec("psycopg"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def check_storage(url: str) -> None:
    """Refuse, without opening anything, a storage URL that does not parse, names no known
    database, or names one that lives only in memory (``sqlite://``, ``sqlite:///:memory:``,
    ``file::memory:``, ``mode=memory``): the study would vanish when spikebench exits."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
        parsed.get_dialect()  # "foo://": no such database
    except Exception as e:  # noqa: BLE001 - ArgumentError, a bad port's ValueError, ...
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"--storage {mask_url(url)}: not a storage URL ({first}); e.g. "
                        "sqlite:///path/study.db or postgresql://user:pass@host/db") from None
    db = parsed.database or ""
    memory = (db in ("", ":memory:") if parsed.get_backend_name() == "sqlite" else
              db == ":memory:")
    memory |= ":memory:" in db or "mode=memory" in db or parsed.query.get("mode") == "memory"
    if memory:
        raise UserError(f"--storage {mask_url(url)}: an in-memory database, which vanishes "
                        "when spikebench exits; give a file (sqlite:///path/study.db) or a "
                        "server (postgresql://user:pass@host/db)")


def make_storage(url: str, *, heartbeat: bool = False) -> optuna.storages.BaseStorage:
    """An RDB storage for ``url``; with ``heartbeat``, stale trials of dead workers are failed
    after a grace period and retried (up to twice) by whichever worker sees them first.
    ``grpc://host:port``: a client of the storage proxy (:mod:`.proxy`)."""
    if url.startswith("grpc://"):
        from spikebench.sweep.proxy import open_proxy

        return open_proxy(url, heartbeat=heartbeat)
    check_storage(url)
    kwargs: dict[str, Any] = {}
    if heartbeat:  # a dead worker's trial is retried like an interrupted one
        from spikebench.sweep.studies import RetryStaleTrial


        kwargs = dict(heartbeat_interval=30, grace_period=120,
                      heartbeat_stale_trial_callback=RetryStaleTrial(max_retry=2))
    if is_sqlite(url):
        # SQLite waits for a lock instead of failing at once; only one process writes anyway.
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": 60}}
    else:  # a server may restart: pooled connections are checked, calls retried
        kwargs["engine_kwargs"] = {"pool_pre_ping": True}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            # SQLite's errors are not a server restarting: no retries there.
            return RetryingRDBStorage(driver_url(url), retry_s=0.0 if is_sqlite(url) else
                                      STORAGE_RETRY_S, **kwargs)
    except Exception as e:  # noqa: BLE001 - SQLAlchemy/driver errors vary by backend
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"--storage {mask_url(url)}: cannot open ({first})") from None
