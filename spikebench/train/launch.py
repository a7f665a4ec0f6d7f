"""Start a data-parallel run's ranks on this machine: torchrun, in this process.

``python -m spikebench.train.launch N MODULE ARGS...`` runs ``python -m MODULE ARGS`` as N
ranks (``--standalone``: a free port on loopback, no restarts). This process is torchrun's
agent: it dies with the process that started it (a sweep's trial or ``spikebench train``),
and when a rank fails it stops the others and ends with one line naming the rank and how
it ended. A rank that hangs instead is ended by ``train.dist_timeout_s``: its peers' next
collective fails, and the agent stops it.
"""

from __future__ import annotations

import json
import os
import re
import sys

from spikebench.runio import die_with_parent


def command(nproc: int, module: str, *args: str) -> list[str]:
    """The command line that runs ``python -m module args`` as ``nproc`` ranks."""
    return [sys.executable, "-m", "spikebench.train.launch", str(nproc), module, *args]


def describe(failure) -> str:
    """How a rank ended, from torchrun's ``ProcessFailure``: its signal or exit code, and
    the first line of the exception a rank under :func:`record` left (paths of the C++
    sources dropped)."""
    if failure.exitcode < 0:
        return f"killed by {failure.signal_name()}"
    why = failure.message
    why = why.get("message", "") if isinstance(why, dict) else str(why or "")
    why = re.sub(r"\[/[^\]]*\] ?", "", why.strip().split("\n")[0])
    if why.startswith("To enable traceback"):  # torchrun's text when the rank left none
        why = ""
    return f"exit code {failure.exitcode}" + (f": {why}" if why else "")


def cause(failures: dict) -> tuple[int, object]:
    """The rank whose failure caused the others: torchrun's failure times are whole seconds,
    so a rank that died and the peer the agent then stopped (SIGTERM) or whose collective
    failed often tie. A rank killed by another signal comes first, then one that exited with
    an error, then one stopped by SIGTERM; ties go to the earliest, then the lowest rank."""
    def order(rank):
        f = failures[rank]
        stopped = f.exitcode < 0 and f.signal_name() == "SIGTERM"
        return (2 if stopped else 0 if f.exitcode < 0 else 1), f.timestamp, rank
    rank = min(failures, key=order)
    return rank, failures[rank]


def recorded(func):
    """``func`` under torchrun's ``record`` (a rank's exception in its error file, for the
    agent's one line), the file written whole: to a temporary name, then renamed. torchrun
    writes it in place, and its agent, stopping this rank because a peer died, could read it
    half written and fail on the JSON instead of naming the rank that died."""
    from torch.distributed.elastic.multiprocessing.errors import record
    from torch.distributed.elastic.multiprocessing.errors.error_handler import ErrorHandler

    class WholeFile(ErrorHandler):
        def record_exception(self, e: BaseException) -> None:
            final = super()._get_error_file_path()
            if not final:
                return super().record_exception(e)
            tmp = f"{final}.{os.getpid()}.tmp"
            self._get_error_file_path = lambda: tmp  # the handler's own write goes there
            try:
                super().record_exception(e)
                os.replace(tmp, final)
            finally:
                del self._get_error_file_path

    return record(func, WholeFile())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not die_with_parent():
        return 3
    nproc, module, *rest = argv
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    args = parse_args(["--standalone", f"--nproc-per-node={nproc}", "--max-restarts=0",
                       "-m", module, *rest])
    # The ranks die with this agent (torchrun starts each in a session of its own, so
    # nothing else would stop them if it were killed): they check for it by this pid.
    os.environ["SPIKEBENCH_PARENT_PID"] = str(os.getpid())
    try:
        run(args)
    except ChildFailedError as e:
        rank, failure = cause(e.failures)
        print(f"data-parallel run failed: rank {rank} (pid {failure.pid}) "
              f"{describe(failure)}; the other ranks were stopped", file=sys.stderr)
        return 1
    except json.JSONDecodeError as e:
        # torchrun reads each failed rank's error file as JSON, and can read one while the
        # rank is still writing it (a peer killed, this rank's collective failing at once):
        # the failure stays one line. The ranks die with this process (SPIKEBENCH_PARENT_PID).
        print(f"data-parallel run failed: ranks ended, and torchrun could not read a rank's "
              f"error report ({type(e).__name__}: {str(e).splitlines()[0][:120]})",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
