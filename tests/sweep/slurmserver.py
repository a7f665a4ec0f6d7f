"""A real, throwaway one-node Slurm cluster for tests: Debian's ``slurmctld``, ``slurmd`` and
``munge`` (no systemd, no cgroups, no system configuration touched).

``slurm_cluster()`` makes a temporary folder with its own munge key and ``munged`` (run as
the ``munge`` user, on a socket in that folder), writes a ``slurm.conf`` for this host on
free ports, starts ``slurmctld`` and ``slurmd`` as root, waits until the node is idle, and
yields a :class:`Cluster` whose ``env`` (``SLURM_CONF`` set) every client must run with.
Afterwards it cancels what is left, stops the daemons and deletes the folder.

The node offers 8 CPUs whatever this machine has (``SlurmdParameters=config_overrides``),
so an array of a few one-CPU tasks runs at once on a 2-core runner, and ``gpus`` fake GPUs
(gres.conf ``File=`` links to /dev/null: ``--gres=gpu:1`` sets ``CUDA_VISIBLE_DEVICES``).
``AuthInfo=cred_expire=5`` (with 2 or 3 a requeued job still waited over a minute) and a
scheduler pass every second or two let a requeued job start again in about 6 s instead of
2 minutes.

Where the packages are missing or this is not root, the test is skipped, except in CI
(``CI`` set), where that is a broken setup and fails (:func:`pgserver.unavailable`).
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pgserver import free_port, unavailable

SETUP_HINT = ("install `slurmctld slurmd munge slurm-client` (`.ci/setup-services` does)")
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")


@dataclass
class Cluster:
    folder: Path
    env: dict[str, str]  # os.environ with SLURM_CONF: for sbatch, squeue, scontrol...

    def run(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(list(args), env=self.env, capture_output=True, text=True,
                              timeout=60)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr}")
        return done.stdout

    def jobs(self, job_id: str) -> dict[str, str]:
        """Task id (``123_0``) -> state, from slurmctld (jobs finished within MinJobAge)."""
        out = self.run("squeue", "-h", "-t", "all", "-r", "-j", job_id, "-o", "%i %T",
                       check=False)
        return dict(line.split() for line in out.splitlines() if line.strip())

    def wait(self, job_id: str, until, timeout: float = 60, what: str = "") -> dict[str, str]:
        """Poll the job's task states until ``until(states)``; its states."""
        end = time.monotonic() + timeout
        while True:
            states = self.jobs(job_id)
            if states and until(states):
                return states
            if time.monotonic() > end:
                raise TimeoutError(f"job {job_id}: {what or 'condition'} not reached in "
                                   f"{timeout:.0f} s; states {states}\n{self.logs()}")
            time.sleep(0.5)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}"
                         for p in sorted((self.folder / "log").glob("*.log")))


def _find(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin")


def _stop(pid_file: Path, timeout: float = 3) -> None:
    # A throwaway daemon: SIGTERM, and SIGKILL if it takes longer than a test should wait.
    try:
        pid = int(pid_file.read_text().strip())
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError):
        return
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:  # gone, or a zombie (a daemon's parent is init, which may not reap it here)
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return
        except (OSError, IndexError):
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


@contextmanager
def slurm_cluster(gpus: int = 2) -> Iterator[Cluster]:
    missing = [n for n in (*DAEMONS, *CLIENTS) if _find(n) is None]
    if missing:
        unavailable(f"Slurm/munge programs not found: {', '.join(missing)}; {SETUP_HINT}")
    if os.geteuid() != 0:
        unavailable("slurmd must run as root to start jobs (this test is not root)")
    try:
        munge = pwd.getpwnam("munge")
    except KeyError:
        unavailable(f"no `munge` user; {SETUP_HINT}")

    tmp = Path(tempfile.mkdtemp(prefix="spikebench-slurm-"))
    tmp.chmod(0o755)  # munged checks that every folder above its socket lets others in
    host = socket.gethostname().split(".")[0]
    (tmp / "munge").mkdir(mode=0o755)
    key = tmp / "munge" / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o600)
    for p in (tmp / "munge", key):
        os.chown(p, munge.pw_uid, munge.pw_gid)
    sock = tmp / "munge" / "munge.socket"
    for sub in ("state", "spool", "log", "dev"):
        (tmp / sub).mkdir()
    for i in range(gpus):  # a GRES file must be a device: a link to one will do
        (tmp / "dev" / f"gpu{i}").symlink_to("/dev/null")
    conf = tmp / "slurm.conf"
    gres = f"Gres=gpu:fake:{gpus} " if gpus else ""
    conf.write_text(f"""\
ClusterName=spikebench
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock},cred_expire=5
StateSaveLocation={tmp / 'state'}
SlurmdSpoolDir={tmp / 'spool'}
SlurmctldPidFile={tmp / 'slurmctld.pid'}
SlurmdPidFile={tmp / 'slurmd.pid'}
SlurmctldLogFile={tmp / 'log' / 'slurmctld.log'}
SlurmdLogFile={tmp / 'log' / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=bf_interval=1,sched_interval=2
ReturnToService=2
SlurmdParameters=config_overrides
GresTypes=gpu
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=5
MinJobAge=300
NodeName={host} NodeAddr=127.0.0.1 CPUs=8 {gres}State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")
    (tmp / "gres.conf").write_text(
        f"NodeName={host} Name=gpu Type=fake File={tmp / 'dev'}/gpu[0-{gpus - 1}]\n"
        if gpus else "")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    for k in [k for k in env if k.startswith(("SLURM_", "SBATCH_", "SQUEUE_")) and
              k != "SLURM_CONF"]:
        del env[k]  # a test run inside a Slurm job must not submit into that one
    cluster = Cluster(tmp, env)

    def start(*cmd: str) -> None:
        done = subprocess.run(list(cmd), env=env, capture_output=True, text=True,
                              timeout=30, cwd=tmp)
        if done.returncode != 0:
            raise RuntimeError(f"{cmd[0]} failed ({done.returncode}): {done.stderr}"
                               f"{cluster.logs()}")

    try:
        start("runuser", "-u", "munge", "--", _find("munged"), f"--socket={sock}",
              f"--key-file={key}", f"--pid-file={tmp / 'munge' / 'munged.pid'}",
              f"--log-file={tmp / 'munge' / 'munged.log'}",
              f"--seed-file={tmp / 'munge' / 'munged.seed'}")
        start(_find("slurmctld"), "-f", str(conf), "-i")
        start(_find("slurmd"), "-f", str(conf), "-N", host)
        end = time.monotonic() + 30
        while cluster.run("sinfo", "-h", "-o", "%T", check=False).strip() != "idle":
            if time.monotonic() > end:
                raise RuntimeError(f"the Slurm node did not become idle in 30 s:\n"
                                   f"{cluster.run('sinfo', '-N', '-l', check=False)}"
                                   f"{cluster.logs()}")
            time.sleep(0.2)
        yield cluster
    finally:
        try:
            cluster.run("scancel", "--full", "--user", pwd.getpwuid(os.geteuid()).pw_name,
                        check=False)
            end = time.monotonic() + 15  # the jobs' processes end before their daemon
            while cluster.run("squeue", "-h", check=False).strip() and time.monotonic() < end:
                time.sleep(0.2)
        except (OSError, subprocess.SubprocessError):
            pass
        _stop(tmp / "slurmd.pid")
        _stop(tmp / "slurmctld.pid")
        _stop(tmp / "munge" / "munged.pid")
        shutil.rmtree(tmp, ignore_errors=True)
