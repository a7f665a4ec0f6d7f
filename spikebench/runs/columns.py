"""Which column (or tag, or metric key) holds the step, the training loss and the rest.

One set of rules for every format, so a CSV, a TensorBoard folder and an MLflow run are read
alike. Names match case-insensitively. The rule that matters: a guess is taken only where
exactly one column fits; where several do, the read stops with one line listing them (the
user picks with ``--step`` / ``--metric``), except the two cases that have a right answer,
which are taken and said (``note``):

- W&B's ``_step`` (its count of ``wandb.log`` calls) beside the trainer's own step
  (``train/global_step`` from the HF Trainer): the trainer's step. ``_step`` is one behind
  it from the first row and drifts further with every evaluation row.
- A loss name that holds one value beside one that holds a series: the one value is a run
  summary (the HF Trainer logs its mean ``train_loss`` once, at the end), not the series.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from spikebench import metrics as M
from spikebench.errors import UserError

# The trainer's step; W&B's own counter comes last (see the module docstring).
STEP_NAMES = ("step", "global_step", "train/global_step", "trainer/global_step")
WANDB_STEP = "_step"
# The per-step training loss: ours, HF's (``loss``; ``train/loss`` through W&B and
# TensorBoard), Lightning's (``train_loss``, or ``train_loss_step`` when also logged per
# epoch), the PyTorch tutorial's TensorBoard tag. ``train_loss_epoch`` is an epoch mean.
LOSS_NAMES = ("loss", M.TRAIN_LOSS, "train_loss", "train_loss_step", "loss/train")
GRAD_NAMES = ("grad_norm", M.GRAD_NORM, "train/grad_norm")
VAL_NAMES = (M.VAL_LOSS, "val_loss", "eval/loss", "eval_loss", "validation/loss",
             "validation_loss", "valid/loss", "valid_loss", "loss/val", "val_loss_epoch",
             "val/lm_loss")
LR_NAMES = (M.LR, "lr", "learning_rate", "train/learning_rate", "train/lr", "lr-adamw",
            "lr-adam", "lr-sgd")
TOKEN_NAMES = (M.TOKENS, "tokens", "num_input_tokens_seen", "train/num_input_tokens_seen",
               "train/tokens")
# A trainer's own throughput (``spikebench bench`` compares it): tokens a second, seconds
# a step.
TOKENS_PER_S_NAMES = (M.TOKENS_PER_S, "tokens_per_s", "tokens_per_sec", "tokens/s", "tok/s",
                      "train/tokens_per_s")
STEP_S_NAMES = (M.STEP_S, "step_s", "step_time", "time/step", "s_per_step", "iter_time")
# The series a run may have beside its loss and grad norm, by record key; the first name
# present is read. They decide no spike.
OPTIONAL = ((M.VAL_LOSS, VAL_NAMES), (M.LR, LR_NAMES), (M.TOKENS, TOKEN_NAMES),
            (M.TOKENS_PER_S, TOKENS_PER_S_NAMES), (M.STEP_S, STEP_S_NAMES))


class MissingColumn(UserError):
    """No step or loss column at all: in a folder walk, a file that is no training log
    (a results table beside the runs) is skipped for this, and said so. ``name``: the
    column asked for by name, where one was; ``found``: the columns there are."""

    def __init__(self, message: str, name: str | None = None, found: Sequence[str] = ()):
        super().__init__(message)
        self.name, self.found = name, list(found)


def norm(name: str) -> str:
    return name.strip().lower()


def _listed(names: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def find(cols: Sequence[str], names: Sequence[str]) -> list[str]:
    """The columns among ``cols`` with one of ``names``, in the order of ``names``."""
    by = {}
    for c in cols:
        by.setdefault(norm(c), c)
    return [by[n.lower()] for n in names if n.lower() in by]


def _explicit(where: str, cols: Sequence[str], name: str, what: str, flag: str) -> str:
    got = find(cols, (name,))
    if got:
        return got[0]
    # A W&B chart export names a run's series "<run> - <metric>".
    suffix = [c for c in cols if norm(c).endswith(" - " + name.lower())]
    if len(suffix) == 1:
        return suffix[0]
    if len(suffix) > 1:
        raise UserError(f"{where}: {flag} {name}: several runs' {what}s match: "
                        f"{_listed(suffix)}; read the file as a W&B chart export "
                        "(`spikebench spikes FILE` analyses each run by name)")
    raise MissingColumn(f"{where}: {flag} {name}: no {what} {name!r} "
                        f"(found {_listed(list(cols))})", name, cols)


def pick_step(where: str, cols: Sequence[str], explicit: str | None = None,
              what: str = "column") -> tuple[str, str]:
    """(the step column, a note saying why where a choice was made)."""
    if explicit:
        return _explicit(where, cols, explicit, what, "--step"), ""
    trainer = find(cols, STEP_NAMES)
    wandb = find(cols, (WANDB_STEP,))
    if len(trainer) > 1:
        raise UserError(f"{where}: several step {what}s: {_listed(trainer + wandb)}; "
                        "choose one with --step NAME")
    if trainer:
        note = (f"step {what} {trainer[0]!r}, the trainer's step ({wandb[0]!r} is W&B's "
                f"count of log calls; --step {wandb[0]} reads that)" if wandb else "")
        return trainer[0], note
    if wandb:
        return wandb[0], ""
    raise MissingColumn(f"{where}: no step {what} (looked for "
                        f"{', '.join((*STEP_NAMES, WANDB_STEP))}; found {_listed(list(cols))}); "
                        + ("the header reads as one column: only ',' and tab (.tsv) separate "
                           "columns" if len(cols) == 1 and ";" in cols[0] else "use --step NAME"))


def pick_loss(where: str, cols: Sequence[str], explicit: str | None = None,
              count: Callable[[str], int] | None = None, what: str = "column"
              ) -> tuple[str, str]:
    """(the training-loss column, a note). ``count`` (values a column holds), where
    given, lets a one-value summary give way to a series (module docstring)."""
    if explicit:
        return _explicit(where, cols, explicit, what, "--metric"), ""
    exact, note = find(cols, LOSS_NAMES), ""
    if len(exact) > 1 and count is not None:
        series = [c for c in exact if count(c) > 1]
        if series and len(series) < len(exact):
            single = [c for c in exact if c not in series]
            note = (f"{_listed(single)} ignored: a single value (a run summary, "
                    "not a per-step loss)")
            exact = series
    if len(exact) > 1:
        raise UserError(f"{where}: several loss {what}s: {_listed(exact)}; "
                        "choose one with --metric NAME")
    if exact:
        return exact[0], note
    runs = [c for c in cols if any(norm(c).endswith(" - " + n.lower()) for n in LOSS_NAMES)]
    if len(runs) > 1:
        raise UserError(f"{where}: loss {what}s of several runs: {_listed(runs)}; a W&B "
                        "chart export (`spikebench spikes FILE` analyses each run by name)")
    if runs:
        return runs[0], ""
    lowered = {norm(c) for c in cols}
    if "value" in lowered and "tag" in lowered:
        raise UserError(f"{where}: a long-format log (step, tag, value: one series per tag); "
                        "`spikebench spikes FILE` reads it tag by tag")
    value = find(cols, ("value",))  # TensorBoard's own CSV download: Wall time, Step, Value
    if value:
        return value[0], ""
    raise MissingColumn(f"{where}: no loss {what} (looked for {', '.join(LOSS_NAMES)}; found "
                    f"{_listed(list(cols))}); use --metric NAME")


def pick_grad(where: str, cols: Sequence[str], explicit: str | None = None,
              what: str = "column") -> str | None:
    """The grad-norm column (optional): ``--grad-metric``'s, else the first known name,
    else a single W&B chart column ``<run> - <name>``."""
    if explicit:
        return _explicit(where, cols, explicit, what, "--grad-metric")
    got = find(cols, GRAD_NAMES)
    if not got:
        got = [c for c in cols
               if any(norm(c).endswith(" - " + n.lower()) for n in GRAD_NAMES)]
        got = got if len(got) == 1 else []
    return got[0] if got else None


def pick_optional(cols: Sequence[str], names: Sequence[str], used: Sequence[str] = ()
                  ) -> str | None:
    """The first of ``names`` among ``cols`` not already ``used``: for the series a run
    may have (validation loss, learning rate, tokens), where the first by priority is
    the one that reads; they decide no spike."""
    got = [c for c in find(cols, names) if c not in used]
    if not got and names is LR_NAMES:  # Lightning's LearningRateMonitor: lr-<optimizer>
        got = [c for c in cols if norm(c).startswith("lr-") and c not in used]
    return got[0] if got else None


@dataclass
class Choice:
    """The columns a table is read by: the step's, and per record key (``M.TRAIN_LOSS``,
    ``M.GRAD_NORM``, the :data:`OPTIONAL` keys, ``M.INJECTED``) the source's column; how a
    choice was made where one was (``notes``)."""

    step: str
    series: dict[str, str]
    notes: tuple[str, ...] = ()


def choose(where: str, cols: Sequence[str], *, step_col: str | None = None,
           step: str | None = None, metric: str | None = None,
           grad_metric: str | None = None, extra: Mapping[str, str] | None = None,
           count: Callable[[str], int] | None = None, what: str = "column") -> Choice:
    """Every column of a table by these rules, the one choice every reader makes: the
    step (``step_col`` where the reader laid the steps out itself), the loss, the grad
    norm, the optional series, and ``extra`` (record key -> the column a caller names,
    e.g. a bench suite's throughput column: absent, :class:`MissingColumn`; a key ending
    in ``*`` keeps every column its value matches as a glob, under its own name, and
    requires none: ``{"probe/*": "probe/*"}``)."""
    step_note = ""
    if step_col is None:
        step_col, step_note = pick_step(where, cols, step, what)
    rest = [c for c in cols if c != step_col]
    loss_col, loss_note = pick_loss(where, rest, metric, count, what)
    grad_col = pick_grad(where, [c for c in rest if c != loss_col], grad_metric, what)
    series = {M.TRAIN_LOSS: loss_col, **({M.GRAD_NORM: grad_col} if grad_col else {})}
    used: list[str] = [c for c in series.values()]
    for key, names in OPTIONAL:
        if extra and key in extra:
            continue
        col = pick_optional(rest, names, used)
        if col is not None:
            series[key] = col
            used.append(col)
    for key, name in (extra or {}).items():
        if key.endswith("*"):  # every column the pattern matches, none required (probes)
            for c in rest:
                if fnmatch.fnmatchcase(c, name) and c not in used and c not in series:
                    series[c] = c
                    used.append(c)
            continue
        series[key] = _explicit(where, cols, name, what, key)
    if M.INJECTED in rest:
        series[M.INJECTED] = M.INJECTED
    return Choice(step_col, series, tuple(n for n in (step_note, loss_note) if n))
