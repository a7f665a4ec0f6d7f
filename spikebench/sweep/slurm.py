"""``spikebench slurm``: a shared study's workers started by Slurm, as one job array.

The study must exist on a shared storage (``spikebench sweep FILE --storage URL --jobs 0``
made it). This writes a batch script whose every array task runs one ``spikebench worker``
of the study, each with the GPUs of one trial (``--gres=gpu:K``, K = the study's
``train.nproc``; Slurm sets ``CUDA_VISIBLE_DEVICES``), and submits it with ``sbatch``. Before
anything is written or submitted it checks that ``sbatch`` is there, that the storage opens
and that it holds the study, each failure one line.

The storage URL (its password) is not written into the script: ``sbatch`` is given it in
its environment as ``SPIKEBENCH_STORAGE``, which Slurm keeps with the job (a requeued job
gets it again), and the worker reads it from there (``spikebench worker`` without
``--storage``), so it is in no file and no process's arguments.

Stopping (:mod:`.preempt`): a task's worker gets SIGTERM on ``scancel``, a preemption or
Slurm's time limit, and ``--grace`` seconds before that limit the batch shell gets USR1
(``--signal=B:USR1@grace``). Either way the worker gives its trial back to the study (not
counted, not a retry) and exits; on USR1 the task then requeues itself
(``scontrol requeue``, ``--requeue``), and runs again to finish the study.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from spikebench import __version__
from spikebench.errors import UserError

STORAGE_ENV = "SPIKEBENCH_STORAGE"  # the storage URL, in the job's environment
SCRIPT = "worker.sbatch"  # in the --out folder, beside the tasks' logs
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--storage", metavar="URL", default=os.environ.get(STORAGE_ENV),
                   help=f"the study's storage URL (default: ${STORAGE_ENV})")
    p.add_argument("--study", required=True, help="study name (its sweep file's study.name)")
    p.add_argument("--workers", type=int, required=True, metavar="N",
                   help="array tasks, one worker each")
    p.add_argument("--parallel", type=int, metavar="P",
                   help="at most P tasks running at once (--array=0-(N-1)%%P)")
    p.add_argument("--gpus", type=int, metavar="K",
                   help="GPUs per worker, --gres=gpu:K (default: the study's; 0: CPU only)")
    p.add_argument("--cpus", type=int, metavar="C", help="--cpus-per-task (default: Slurm's)")
    p.add_argument("--partition", help="Slurm partition (default: Slurm's default)")
    p.add_argument("--time", metavar="LIMIT",
                   help="time limit per task: minutes, HH:MM:SS, D-HH:MM... (sbatch's)")
    p.add_argument("--grace", type=int, default=120, metavar="S",
                   help="seconds before the time limit the worker stops (default: 120)")
    p.add_argument("--no-requeue", action="store_true",
                   help="a task stopped near its time limit is not requeued")
    p.add_argument("--sbatch", action="append", default=[], metavar="OPTION",
                   help="another #SBATCH line, e.g. --sbatch=--account=lm (repeatable)")
    p.add_argument("--results", default="results",
                   help="the workers' results folder (default: results)")
    p.add_argument("--out", metavar="DIR",
                   help="script and task logs (default: RESULTS/<study>/slurm)")
    p.add_argument("--script-only", action="store_true",
                   help="write the script, submit nothing")


@dataclass
class Job:
    """What the batch script asks of Slurm, and what each task runs."""

    study: str
    results: Path
    out: Path
    workers: int
    gpus: int
    parallel: int | None = None
    cpus: int | None = None
    partition: str | None = None
    time: str | None = None
    grace: int = 120
    requeue: bool = True
    extra: list[str] = field(default_factory=list)
    python: str = sys.executable

    def sbatch_lines(self) -> list[str]:
        array = f"0-{self.workers - 1}" + (f"%{self.parallel}" if self.parallel else "")
        lines = [f"--job-name={_job_name(self.study)}", f"--array={array}",
                 f"--output={self.out / '%x-%A_%a.out'}", "--open-mode=append"]
        lines += [f"--gres=gpu:{self.gpus}"] if self.gpus else []
        lines += [f"--cpus-per-task={self.cpus}"] if self.cpus else []
        lines += [f"--partition={self.partition}"] if self.partition else []
        lines += [f"--time={self.time}"] if self.time else []
        # USR1: the script stops the worker and requeues the task; TERM: it only stops it.
        lines += ["--requeue", f"--signal=B:USR1@{self.grace}"] if self.requeue else [
            "--no-requeue", f"--signal=B:TERM@{self.grace}"]
        return lines + list(self.extra)


def _job_name(study: str) -> str:
    return "spikebench-" + (re.sub(r"[^A-Za-z0-9_.-]", "_", study)[:60] or "study")


def render(job: Job) -> str:
    """The batch script (bash)."""
    q = shlex.quote
    worker = " ".join(q(a) for a in (job.python, "-m", "spikebench", "worker", "--study",
                                     job.study, "--results", str(job.results)))
    head = "\n".join(f"#SBATCH {line}" for line in job.sbatch_lines())
    warning = ("USR1: the worker is stopped and the task requeues itself" if job.requeue
               else "TERM: the worker is stopped")
    requeue = ('trap \'requeue=1; kill -TERM "$worker" 2>/dev/null\' USR1\n'
               if job.requeue else "")
    return f"""#!/bin/bash
# Workers of spikebench study {job.study!r}, written by `spikebench slurm` (spikebench {__version__}).
# Each of the {job.workers} array tasks runs one `spikebench worker`: it takes the study's trials
# from its storage until the study has them all.
#
# The storage URL is not in this file: it comes in the job's environment as
# ${STORAGE_ENV} (spikebench slurm hands it to sbatch; to submit this file by hand,
# export it first). GPUs: --gres below; Slurm sets CUDA_VISIBLE_DEVICES for the task.
# Stopping: on SIGTERM (scancel, preemption, the time limit) the worker gives its trial
# back to the study (run again by a worker, not counted) and exits. {job.grace} s before the
# time limit Slurm sends this shell {warning}.
{head}

if [ -z "${{{STORAGE_ENV}:-}}" ]; then
    echo "spikebench slurm: {STORAGE_ENV} is not set in the job's environment" >&2
    exit 2
fi
echo "spikebench slurm: task ${{SLURM_ARRAY_TASK_ID:-0}} of job ${{SLURM_ARRAY_JOB_ID:-${{SLURM_JOB_ID:-}}}}" \\
     "on $(hostname), CUDA_VISIBLE_DEVICES=${{CUDA_VISIBLE_DEVICES-unset}}," \\
     "restart ${{SLURM_RESTART_COUNT:-0}}" >&2

export PYTHONUNBUFFERED=1
{worker} &
worker=$!
requeue=0
{requeue}trap 'kill -TERM "$worker" 2>/dev/null' TERM
# A trapped signal ends `wait` early: wait again until the worker has given its trial back.
while :; do
    wait "$worker"
    status=$?
    kill -0 "$worker" 2>/dev/null || break
done
if [ "$requeue" = 1 ]; then
    echo "spikebench slurm: time limit near: trial given back, task requeued" >&2
    scontrol requeue "$SLURM_JOB_ID"
fi
exit "$status"
"""


def seconds(limit: str) -> int | None:
    """Seconds of an sbatch ``--time`` (None: unlimited); ValueError if it does not parse."""
    if limit.upper() in ("UNLIMITED", "INFINITE", "-1"):
        return None
    m = _TIME.match(limit)
    if not m:
        raise ValueError(limit)
    days, a, b, c = (int(x) if x else None for x in m.groups())
    if days is not None:  # D-H, D-H:M, D-H:M:S
        h, mi, s = a, b or 0, c or 0
        return ((days * 24 + h) * 60 + mi) * 60 + s
    if c is not None:  # H:M:S
        return (a * 60 + b) * 60 + c
    return a * 60 + (b or 0)  # M, M:S


def _checked(args: argparse.Namespace) -> None:
    """The options alone, before anything is opened (each refusal one line)."""
    for name in ("workers", "parallel", "cpus"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UserError(f"--{name} {value}: must be >= 1")
    if args.gpus is not None and args.gpus < 0:
        raise UserError(f"--gpus {args.gpus}: must be >= 0 (0: CPU only, no --gres)")
    if not 1 <= args.grace <= 65535:
        raise UserError(f"--grace {args.grace}: must be in [1, 65535] seconds (sbatch's "
                        "--signal takes no more)")
    if args.time is not None:
        try:
            limit = seconds(args.time)
        except ValueError:
            raise UserError(f"--time {args.time!r}: not a Slurm time limit; e.g. 90 "
                            "(minutes), 4:00:00, 2-00:00:00") from None
        if limit is not None and limit <= args.grace:
            raise UserError(f"--time {args.time!r}: {limit} s, not more than --grace "
                            f"{args.grace} s: the worker would be told to stop at once")
    for option in args.sbatch:
        if not option.startswith("--") or "\n" in option:
            raise UserError(f"--sbatch {option!r}: give one long sbatch option, e.g. "
                            "--sbatch=--account=lm")
    if any(c in args.study for c in "\n\r\0"):
        raise UserError(f"--study {args.study!r}: a study name is one line")


def study_gpus(url: str, study_name: str) -> tuple[int, int, int]:
    """Open the storage and the study, read only: (GPUs one trial takes, trials done,
    target). A storage that cannot be opened or shared, or no such study: one line."""
    import optuna

    from spikebench.sweep.storage import is_sqlite, make_storage, mask_url
    from spikebench.sweep.studies import count_done, load_spec

    if is_sqlite(url):
        raise UserError(f"--storage {mask_url(url)}: Slurm's workers run on several nodes "
                        "and cannot share SQLite; give the study's PostgreSQL URL")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = make_storage(url)
    try:
        study = optuna.load_study(study_name=study_name, storage=storage)
    except KeyError:
        raise UserError(f"--study {study_name!r}: no such study in {mask_url(url)}") from None
    spec = load_spec(study)
    # As the worker takes its slot (worker.py): a command trial one GPU, else train.nproc.
    if spec.trainer:
        gpus = 1
    elif spec.base.get("train.device") == "cpu":
        gpus = 0
    else:
        gpus = int(spec.base.get("train.nproc", 1))
    return gpus, count_done(study), study.user_attrs.get("target_trials", 0)


def submit(script: Path, url: str) -> str:
    """``sbatch --parsable SCRIPT`` with the URL in its environment; the job id."""
    env = {**os.environ, STORAGE_ENV: url}
    try:
        done = subprocess.run(["sbatch", "--parsable", str(script)], env=env,
                              capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UserError(f"sbatch: could not run ({e})") from None
    if done.returncode != 0:
        first = next((ln.strip() for ln in done.stderr.splitlines() if ln.strip()),
                     f"exit code {done.returncode}")
        raise UserError(f"sbatch refused the job: {first}")
    return done.stdout.strip().split(";")[0]


def run_slurm(args: argparse.Namespace, log=print) -> int:
    _checked(args)
    results = Path(args.results).resolve()
    out = Path(args.out).resolve() if args.out else results / args.study / "slurm"
    if any(c.isspace() for c in str(out)):  # sbatch splits an #SBATCH line at blanks
        raise UserError(f"--out {str(out)!r}: the task logs' folder may hold no blank "
                        "(it goes on an #SBATCH --output line); give --out")
    if args.storage is None:
        raise UserError(f"--storage: missing; give the study's storage URL or set "
                        f"{STORAGE_ENV}")
    if not args.script_only and shutil.which("sbatch") is None:
        raise UserError("sbatch: not found on PATH (Slurm's client; run this on a login "
                        "node, or --script-only writes the script without submitting it)")
    gpus, done, target = study_gpus(args.storage, args.study)
    if done >= target:
        log(f"study {args.study!r} has all its {target} trials; nothing submitted")
        return 0
    job = Job(study=args.study, results=results, out=out, workers=args.workers,
              gpus=gpus if args.gpus is None else args.gpus, parallel=args.parallel,
              cpus=args.cpus, partition=args.partition, time=args.time, grace=args.grace,
              requeue=not args.no_requeue, extra=args.sbatch)
    from spikebench.sweep.folders import make_folder

    make_folder(out, args.out or args.results)
    script = out / SCRIPT
    script.write_text(render(job))
    script.chmod(0o755)
    what = (f"{job.workers} worker(s) of study {args.study!r}, "
            + (f"{job.gpus} GPU(s) each" if job.gpus else "no GPU"))
    if args.script_only:
        log(f"wrote {script}: {what}; submit it with {STORAGE_ENV}=<url> sbatch {script}")
        return 0
    try:
        job_id = submit(script, args.storage)
    except UserError:
        script.unlink()  # nothing submitted: no script left that looks as if it ran
        raise
    log(f"submitted job {job_id}: {what} ({done}/{target} trials done); "
        f"logs {out}/{_job_name(args.study)}-{job_id}_<task>.out; watch: squeue -j {job_id}")
    return 0
