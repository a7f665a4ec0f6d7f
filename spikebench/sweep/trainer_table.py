"""A sweep file's ``[trainer]`` table: the command each seed runs (:mod:`.command`), its
step budget, how often it validates, its log, its environment, its grace on a stop and its
time limits; and what a trainer's parameters may be named."""

from __future__ import annotations

import json
import math
import re
import shlex
from typing import Any

from spikebench.errors import UserError
from spikebench.sweep.spec_errors import err

TRAINER_KEYS = ("command", "steps", "eval_every", "log", "env", "grace_s", "timeout_s",
                "stall_s")
MACROS = ("params_file", "params_json", "run_dir", "seed", "trial_dir", "checkpoint_dir")
ARGS_MACRO = "{args}"  # a whole element: the parameters as --key=value flags
# The seed being run reaches the command as {seed} and SPIKEBENCH_SEED, one per seed of a
# trial; a parameter of this name would give every seed the one value in {args} and the
# params file, so it is refused (study.seeds sets the seeds).
SEED_KEY = "seed"


def key_name(key: str) -> str:
    """A key as a refusal names it: as written, or quoted (JSON) where it holds a line break
    or another character a terminal does not show, so that the refusal stays one line."""
    return key if key.isprintable() else json.dumps(key)


def parse_trainer(path: str, table: dict[str, Any]) -> dict[str, Any]:
    """``[trainer]``, checked: ``command`` (argv list, or a string split as a shell would),
    ``steps`` (the budget, required), ``eval_every``, ``log``, ``env``, ``grace_s``,
    ``timeout_s`` and ``stall_s`` (0: no limit)."""
    unknown = sorted(set(table) - set(TRAINER_KEYS))
    if unknown:
        raise err(path, f"trainer.{key_name(unknown[0])}", table[unknown[0]],
                   f"unknown key (allowed: {', '.join(TRAINER_KEYS)})")
    command = table.get("command")
    if isinstance(command, str):
        try:
            command = shlex.split(command)
        except ValueError as e:
            raise err(path, "trainer.command", table["command"], f"cannot split ({e})") from None
    if command is None:
        raise UserError(f"{path}: trainer.command: missing: give the command each seed runs, "
                        'e.g. command = ["python", "train.py", "--params", "{params_file}"]')
    if not isinstance(command, list) or not all(isinstance(c, str) for c in command):
        raise err(path, "trainer.command", command, "must be a list of strings or a string")
    if any("\0" in c for c in command):
        raise err(path, "trainer.command", command, "holds a NUL byte, which no argument "
                   "of a process can")
    if not command or not command[0].strip():
        raise err(path, "trainer.command", table["command"],
                   "is empty: give the program to run and its arguments")
    for element in command:
        if element == ARGS_MACRO:
            continue
        for name in re.findall(r"\{([^{}\s]*)\}", element):
            if name == "args":
                raise err(path, "trainer.command", element,
                           '"{args}" must be an element of its own (it expands to one '
                           "--key=value flag per parameter)")
            if name not in MACROS:
                raise err(path, "trainer.command", element, f"unknown macro {{{name}}} "
                           f"(allowed: {', '.join('{' + m + '}' for m in (*MACROS, 'args'))})")
    steps = table.get("steps")
    if steps is None:
        raise UserError(f"{path}: trainer.steps: missing: give the step budget every trial "
                        "runs (steps to target and the scores count against it)")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise err(path, "trainer.steps", steps, "must be an integer >= 1")
    eval_every = table.get("eval_every", max(1, steps // 10))
    if isinstance(eval_every, bool) or not isinstance(eval_every, int) or not (
            1 <= eval_every <= steps):
        raise err(path, "trainer.eval_every", eval_every,
                   f"must be an integer in [1, {steps}] (how often the trainer validates)")
    log = table.get("log", "")
    if not isinstance(log, str) or (log and (log.startswith("/") or ".." in log.split("/")
                                              or "\0" in log or not log.strip("./"))):
        raise err(path, "trainer.log", log, "must be the name of a file or folder inside the "
                   "run folder (relative to it, not the run folder itself)")
    env = table.get("env", {})
    if not isinstance(env, dict) or not all(
            isinstance(v, str | int | float) and not isinstance(v, bool) for v in env.values()):
        raise err(path, "trainer.env", env, "must be a table of names to strings or numbers")
    for name, v in env.items():  # what an environment can hold: execve refuses the rest
        if not name or "=" in name or "\0" in name or "\0" in str(v):
            raise err(path, f"trainer.env.{json.dumps(name)}", v, "an environment variable "
                       "needs a name without '=' and a NUL byte in neither name nor value")
    grace = table.get("grace_s", 10)
    if isinstance(grace, bool) or not isinstance(grace, int | float) or not 0 <= grace < 3600:
        raise err(path, "trainer.grace_s", grace, "must be a number of seconds in [0, 3600)")
    limits = {}
    for key, what in (("timeout_s", "a seed's whole run"),
                      ("stall_s", "a seed's run with no growth of its log")):
        v = table.get(key, 0)
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < math.inf:
            raise err(path, f"trainer.{key}", v, f"must be a number of seconds > 0 (the "
                       f"longest {what}), or 0 for no limit")
        limits[key] = float(v)
    return {"command": command, "steps": steps, "eval_every": eval_every, "log": log,
            "env": {str(k): str(v) for k, v in env.items()}, "grace_s": float(grace),
            **limits}


def _nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\0" in value
    if isinstance(value, list | tuple):
        return any(_nul(v) for v in value)
    return isinstance(value, dict) and any(_nul(k) or _nul(v) for k, v in value.items())


def check_parameter(path: str, where: str, key: str, value: Any) -> None:
    """A trainer's parameter may not be named ``seed`` (the seed is the one being run), nor
    hold a NUL byte, which ``{args}`` could not pass to the command; its name is printable,
    without '=' (``{args}`` passes ``--name=value``), and not empty."""
    if _nul(key) or _nul(value):
        raise err(path, where, value, "holds a NUL byte, which no argument of a process can")
    if not key or "=" in key or not key.isprintable():
        raise err(path, where, value, "a parameter needs a name of printable characters "
                   "without '=' ({args} passes it as --name=value)")
    if key == SEED_KEY:
        raise err(path, where, value, "the seed is not a parameter: each seed of study.seeds "
                   "reaches the command as {seed} and SPIKEBENCH_SEED; drop it (a script "
                   "that wants --seed gets it from {seed})")


def check_arm_keys(path: str, arm: str, where: str, changes: dict[str, Any],
                   declared: set[str]) -> None:
    """An arm of a trainer changes only declared parameters (those [config], [space] and
    the baseline name): a key beside them (``lrr`` for ``lr``) is a typo, not a new one."""
    for key, value in changes.items():
        check_parameter(path, f"{where}.{key_name(key)}", key, value)
        if key not in declared:
            allowed = ", ".join(sorted(declared)) or "none"
            raise err(path, f"{where}.{key_name(key)}", value, f"unknown parameter in arm "
                       f"{json.dumps(arm)} (allowed: {allowed}: the parameters [config], "
                       "[space] and [comparison] baseline declare)")
