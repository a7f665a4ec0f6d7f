"""Optuna's gRPC storage proxy, for studies with hundreds of workers.

``python -m spikebench.sweep.proxy --storage postgresql://... --port 13000`` runs
:func:`optuna.storages.run_grpc_proxy_server` in front of the study's database: the proxy
alone holds database connections (a pool of its own), and its cache answers the workers'
reads of finished trials. Workers then take ``--storage grpc://host:13000``.

Optuna's proxy carries no heartbeats, so a worker behind it beats through a trial system
attribute (:data:`BEAT`, its own clock: workers' clocks must agree to well within the grace
period, as NTP keeps them), and a trial whose last beat (or, if it never beat, its start) is
older than the grace is failed and retried like an RDB storage's stale trial. The target
gate (a PostgreSQL advisory lock) needs a database connection, so behind the proxy it is
off: at the end of a study each worker may start one search trial past the target (the
enqueued arms are taken one by one in the database: never twice), and only the worker that
failed a stale trial queues its retry. A restart of the database behind the proxy is
absorbed by the proxy's own retries; a restart of the proxy is not (workers fail after
gRPC's own retries; restart them).
"""

from __future__ import annotations

import re
import time
import warnings

import optuna
from optuna.trial import TrialState

from spikebench.errors import UserError

BEAT = "spikebench:beat"
_URL = re.compile(r"grpc://(\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.-]+):(\d{1,5})/?")


def is_grpc(url: str) -> bool:
    return url.startswith("grpc://")


def parse(url: str) -> tuple[str, int]:
    m = _URL.fullmatch(url)
    if m is None or not 0 < int(m.group(2)) < 65536:
        raise UserError(f"--storage {url}: not a proxy URL; give grpc://host:port (the "
                        "`python -m spikebench.sweep.proxy` in front of the study's database)")
    return m.group(1).strip("[]"), int(m.group(2))


def _proxy_class():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        from optuna.storages import GrpcStorageProxy

    class BeatingProxy(GrpcStorageProxy):
        """Optuna's gRPC client with heartbeats kept in a trial attribute (module doc)."""

        heartbeat_interval: int | None = None
        grace_period: int | None = None

        def get_heartbeat_interval(self) -> int | None:
            return self.heartbeat_interval

        def record_heartbeat(self, trial_id: int) -> None:
            self.set_trial_system_attr(trial_id, BEAT, time.time())

        def _get_stale_trial_ids(self, study_id: int) -> list[int]:
            if not self.heartbeat_interval:
                return []
            cut = time.time() - (self.grace_period or 2 * self.heartbeat_interval)
            stale = []
            for t in self.get_all_trials(study_id, deepcopy=False, states=(TrialState.RUNNING,)):
                beat = t.system_attrs.get(BEAT)
                if beat is None and "driver" not in t.user_attrs and t.datetime_start:
                    beat = t.datetime_start.timestamp()  # it never beat: since it started
                if beat is not None and beat < cut:
                    stale.append(t._trial_id)
            return stale

    return BeatingProxy


def open_proxy(url: str, *, heartbeat: bool = False, timeout_s: float = 10.0):
    """A client of the proxy at ``url``; refused in one line if none answers there."""
    host, port = parse(url)
    with warnings.catch_warnings():  # experimental since Optuna 4.2: said in the docs
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        storage = _proxy_class()(host=host, port=port)
    try:
        storage.wait_server_ready(timeout=timeout_s)
    except Exception:  # noqa: BLE001 - grpc's FutureTimeoutError, name resolution...
        raise UserError(f"--storage {url}: no storage proxy answers there within "
                        f"{timeout_s:g} s; start one with `python -m spikebench.sweep.proxy "
                        "--storage <database URL> --port <port>`") from None
    if heartbeat:
        from spikebench.sweep.spec import HEARTBEAT_GRACE_S, HEARTBEAT_S

        storage.heartbeat_interval, storage.grace_period = HEARTBEAT_S, HEARTBEAT_GRACE_S
    return storage


def serve(url: str, *, host: str, port: int, threads: int, log=print) -> None:
    """Run the proxy for the database at ``url`` until interrupted."""
    from concurrent.futures import ThreadPoolExecutor

    from spikebench.sweep.storage import make_storage, mask_url

    if is_grpc(url):
        raise UserError(f"--storage {url}: give the database the proxy stands in front of "
                        "(postgresql://...), not another proxy")
    if not 0 < port < 65536:
        raise UserError(f"--port {port}: must be in 1..65535")
    if threads < 1:
        raise UserError(f"--threads {threads}: must be >= 1")
    # Optuna's cached storage in front of the database (what get_storage() builds from a URL),
    # with spikebench's retries beneath it.
    storage = optuna.storages.get_storage(make_storage(url))
    log(f"storage proxy for {mask_url(url)} on {host}:{port} ({threads} threads); workers: "
        f"--storage grpc://{host}:{port}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        try:
            optuna.storages.run_grpc_proxy_server(
                storage, host=host, port=port, thread_pool=ThreadPoolExecutor(threads))
        except RuntimeError as e:  # grpc: the port could not be bound
            raise UserError(f"--port {port}: cannot listen on {host}:{port} ({e})") from None



def main(argv: list[str] | None = None) -> int:
    """``python -m spikebench.sweep.proxy --storage URL --port P``: bad input in one line,
    exit 2, as the ``spikebench`` commands answer."""
    import argparse
    import os
    import sys

    ap = argparse.ArgumentParser(prog="python -m spikebench.sweep.proxy",
                                 description="Optuna's gRPC storage proxy in front of a "
                                 "study's database; workers take --storage grpc://host:port")
    ap.add_argument("--storage", default=os.environ.get("SPIKEBENCH_STORAGE"),
                    help="the database URL (default: $SPIKEBENCH_STORAGE)")
    ap.add_argument("--host", default="0.0.0.0", help="address to listen on (default: all)")
    ap.add_argument("--port", type=int, default=13000, help="port (default: 13000)")
    ap.add_argument("--threads", type=int, default=10,
                    help="requests served at once, each on one database connection (default: 10)")
    args = ap.parse_args(argv)
    try:
        if not args.storage:
            raise UserError("--storage: missing; give the study's database URL or set "
                            "SPIKEBENCH_STORAGE")
        serve(args.storage, host=args.host, port=args.port, threads=args.threads,
              log=lambda s: print(s, file=sys.stderr, flush=True))
    except UserError as e:
        print(f"{ap.prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
