"""The ``/metrics`` endpoint: prometheus_client's HTTP server on one registry, bound to
127.0.0.1 unless the user names another host (a training box rarely wants it public)."""

from __future__ import annotations

import sys
from typing import Any

from spikebench.errors import UserError

DEFAULT_HOST = "127.0.0.1"


def serve(registry: Any, port: int, host: str = DEFAULT_HOST) -> tuple[Any, int]:
    """Start the endpoint in a daemon thread; returns the server and the port it bound
    (``port`` 0 picks a free one). A port in use or a bad host is one line."""
    from prometheus_client import start_http_server

    check_host(host)
    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as e:
        raise UserError(f"--metrics-port {port}: cannot listen on {host}:{port} "
                        f"({e.strerror or e})") from None
    except (UnicodeError, ValueError) as e:  # what check_host cannot foresee
        raise UserError(f"--metrics-host {host[:100]!r}: not a host name or address to "
                        f"listen on ({e})") from None
    bound = server.server_address[1]
    print(f"metrics: http://{host}:{bound}/metrics", file=sys.stderr, flush=True)
    return server, bound


def check_host(host: str) -> None:
    """Refuse, in one line, a ``--metrics-host`` that cannot be a host name or address,
    without a name lookup: a NUL or a space, or a name idna cannot encode (a label over
    63 characters, an empty label: idna's UnicodeError). "" (every interface) and IP
    addresses pass."""
    why = ""
    if any(c.isspace() or c == "\0" for c in host):
        why = "it holds a space or a NUL"
    elif host:
        try:
            encoded = host.encode("idna")
        except UnicodeError as e:
            why = str(e.__cause__ or e) if "idna" in str(e) else str(e)
        else:
            if len(encoded) > 253:
                why = f"{len(encoded)} characters; a host name has at most 253"
    if why:
        raise UserError(f"--metrics-host {host[:100]!r}: not a host name or address to "
                        f"listen on ({why}); must be an IP address or a host name of "
                        "dot-separated labels of 1-63 characters")


def require_client(port: int | None) -> None:
    """A one-line error, before anything runs, when the endpoint is asked for without
    prometheus_client installed."""
    if port is None:
        return
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise UserError(f"--metrics-port {port}: needs prometheus_client (pip install "
                        "'spikebench[monitor]')") from None


def check_listen(port: int | None, host: str) -> None:
    """What serving on ``host:port`` would refuse, checked without serving (so ``--dry-run``
    refuses it too): prometheus_client missing, a host that is not a name or address here
    (idna raises UnicodeError for some), a port that is taken. None: no endpoint asked for."""
    if port is None:
        return
    import socket

    require_client(port)
    try:  # as prometheus_client picks the address it binds
        family, _, _, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                   flags=socket.AI_PASSIVE)[0]
    except (OSError, UnicodeError, ValueError) as e:
        raise UserError(f"--metrics-host {host[:100]!r}: not a host name or address to "
                        f"listen on ({getattr(e, 'strerror', None) or e})") from None
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server sets it
        try:
            s.bind(addr)
        except OSError as e:
            raise UserError(f"--metrics-port {port}: cannot listen on {host[:100]}:{port} "
                            f"({e.strerror or e})") from None


def start_exporter(port: int | None, host: str) -> Any:
    """The :class:`~spikebench.live.exporter.Exporter` behind ``--metrics-port``, serving;
    None without a port."""
    if port is None:
        return None
    check_listen(port, host)
    from spikebench.live.exporter import Exporter

    ex = Exporter()
    serve(ex.registry, port, host)
    return ex
