"""A real, throwaway PostgreSQL server for tests that need a shared Optuna storage.

``postgres_server()`` runs Debian's ``postgresql`` binaries (no system cluster, no service):
initdb into a temporary folder, a server on 127.0.0.1 and a free port with password (SCRAM)
authentication, and one role and database named ``spikebench``. It yields a SQLAlchemy URL
and stops the server and deletes the folder afterwards, whatever happened in between.

Where the binaries (or psycopg2) are missing the test is skipped, except in CI (``CI`` set),
where a missing service is a broken setup and must fail rather than hide the test.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

USER = "spikebench"  # role and database the tests use
# url -> the running server's pg_ctl and psql, for tests that restart it or ask it (chaos.py).
SERVERS: dict[str, dict] = {}
SETUP_HINT = "install Debian's `postgresql` package (`.ci/setup-services` does)"


def unavailable(reason: str) -> None:
    """Skip locally; fail in CI, where the service is part of the setup."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so this is an error, not a skip)", pytrace=False)
    pytest.skip(reason)


def find_bindir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` that has initdb, pg_ctl and psql."""
    found = []
    for initdb in Path("/usr/lib/postgresql").glob("*/bin/initdb"):
        bindir = initdb.parent
        version = bindir.parent.name
        if version.isdigit() and all((bindir / b).exists() for b in ("pg_ctl", "postgres",
                                                                       "psql")):
            found.append((int(version), bindir))
    return max(found)[1] if found else None


def free_port() -> int:
    # The port may be taken again before the server binds it; on a test machine that is rare
    # enough, and the start then fails with the server log in the message.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def restart(url: str, mode: str = "fast") -> None:
    """``pg_ctl restart -m mode`` of the server at ``url`` (every client loses its connection)."""
    SERVERS[url]["pg_ctl"]("restart", "-m", mode)


def pg_ctl(url: str, *args: str) -> None:
    """``pg_ctl stop -m fast``, ``pg_ctl start``... of the server at ``url``."""
    SERVERS[url]["pg_ctl"](*args)


def psql(url: str, sql: str) -> str:
    """Run ``sql`` as the superuser on the server at ``url``; its unaligned output."""
    return SERVERS[url]["psql"](sql)


@contextmanager
def postgres_server(extra_conf: str = "") -> Iterator[str]:
    """Start a private PostgreSQL server; yield its SQLAlchemy URL (psycopg2 driver).
    ``extra_conf``: lines added to its postgresql.conf."""
    bindir = find_bindir()
    if bindir is None:
        unavailable(f"PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin; "
                    f"{SETUP_HINT}")
    try:
        import psycopg2  # noqa: F401 - the URL below names this driver
    except ImportError:
        unavailable("psycopg2 is not installed: pip install -e '.[dev]' (or '.[postgres]')")

    # PostgreSQL refuses to run as root: then the server runs as the `postgres` user that
    # the Debian package creates, and owns the folder.
    as_root = os.geteuid() == 0
    if as_root:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            unavailable(f"running as root and there is no `postgres` user; {SETUP_HINT}")
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []

    tmp = Path(tempfile.mkdtemp(prefix="spikebench-pg-"))
    data, log = tmp / "data", tmp / "server.log"
    if as_root:
        os.chown(tmp, owner.pw_uid, owner.pw_gid)

    def pg(*args: str, stdin: str | None = None) -> str:
        # cwd=tmp: the server user may not be allowed into the caller's working directory.
        proc = subprocess.run(prefix + list(args), cwd=tmp, input=stdin, text=True,
                              capture_output=True, timeout=60)
        if proc.returncode != 0:
            server_log = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{Path(args[0]).name} failed ({proc.returncode}):\n"
                               f"{proc.stdout}{proc.stderr}{server_log}")
        return proc.stdout

    password = secrets.token_hex(16)  # hex: nothing to quote in SQL or in the URL
    port = free_port()
    started = False
    try:
        pg(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-E", "UTF8",
           "--auth=trust", "--no-sync")
        # Only the socket in our private folder is trusted (for the setup below); TCP needs
        # the password, as a real shared storage would.
        (data / "pg_hba.conf").write_text(
            "local all all trust\n"
            f"host {USER} {USER} 127.0.0.1/32 scram-sha-256\n")
        # Durability is pointless for a server that lives for one test; speed is not.
        with open(data / "postgresql.conf", "a") as conf:
            conf.write(f"listen_addresses = '127.0.0.1'\nport = {port}\n"
                       f"unix_socket_directories = '{tmp}'\n"
                       "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                       + extra_conf + "\n")
        pg(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60", "start")
        started = True
        pg(str(bindir / "psql"), "-h", str(tmp), "-p", str(port), "-U", "postgres",
           "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-q",
           # Sent on stdin, so the password is not visible in the process list.
           stdin=f"CREATE ROLE {USER} LOGIN PASSWORD '{password}';\n"
                 f"CREATE DATABASE {USER} OWNER {USER};\n")
        url = f"postgresql://{USER}:{password}@127.0.0.1:{port}/{USER}"
        SERVERS[url] = {
            "pg_ctl": lambda *a: pg(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log),
                                    "-w", "-t", "60", *a),
            "psql": lambda sql: pg(str(bindir / "psql"), "-h", str(tmp), "-p", str(port),
                                   "-U", "postgres", "-d", USER, "-At", "-v",
                                   "ON_ERROR_STOP=1", "-q", stdin=sql)}
        yield url
        SERVERS.pop(url, None)
    finally:
        try:
            if started:
                try:
                    pg(str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
                except (RuntimeError, subprocess.TimeoutExpired):
                    # A client that hangs on must not leave a server on a deleted folder.
                    pg(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
