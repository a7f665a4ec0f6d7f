"""Small fixture studies for the report tests, built without training.

:func:`make_study` writes what a sweep writes: a real Optuna SQLite storage with the sweep
spec in the study's user attributes, one trial per comparison arm and some search trials,
scored by the sweep's own ``scoring.trial`` functions, and minimal trial folders. Outcomes
per arm and seed are deterministic and can be given exactly through ``outcomes``.
"""

from __future__ import annotations

import atexit
import json
import math
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState

from spikebench.metrics import ELAPSED_S, GRAD_NORM, STEP, TOKENS, TRAIN_LOSS, VAL_LOSS
from spikebench.metrics import LR as LR_METRIC
from spikebench.scoring import trial as objectives

STEPS = 100
TARGET = 3.0

SPACE = [
    {"key": "schedule.warmup_ratio", "high": 0.1},  # low 0.0 dropped, as SweepSpec stores it
    {"key": "optim.clip", "low": 0.1, "high": 10.0, "log": True, "off": True},
    {"key": "precision.mode", "choices": ["fp32", "fp16", "bf16"]},
    {"key": "curriculum.kind", "choices": ["off", "seqlen"]},
]
LR = {"key": "optim.lr", "low": 1e-4, "high": 1e-1, "log": True}

BASELINE = {"schedule.warmup_ratio": 0.0, "optim.clip": None, "precision.mode": "fp32",
            "curriculum.kind": "off"}
ARMS = {
    "baseline": {},
    "warmup + cosine": {"schedule.warmup_ratio": 0.025},
    "clip 1.0": {"optim.clip": 1.0},
    "bf16": {"precision.mode": "bf16"},
    "fp16 + loss scaling": {"precision.mode": "fp16"},
    "curriculum (seq-len warmup)": {"curriculum.kind": "seqlen"},
    "recipe": {"schedule.warmup_ratio": 0.025, "optim.clip": 1.0, "precision.mode": "bf16",
               "curriculum.kind": "seqlen"},
}


_TEMPLATE: list[Path] = []


def storage_url(study_dir: Path) -> str:
    """An empty Optuna SQLite storage at ``study_dir/study.db``, copied from a template made
    once per process: creating the schema is slow, copying a file is not."""
    if not _TEMPLATE:
        tmp = Path(tempfile.mkdtemp(prefix="spikebench-report-fixture-")) / "template.db"
        atexit.register(shutil.rmtree, tmp.parent, ignore_errors=True)
        optuna.storages.RDBStorage(f"sqlite:///{tmp}")
        _TEMPLATE.append(tmp)
    study_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_TEMPLATE[0], study_dir / "study.db")
    return f"sqlite:///{(study_dir / 'study.db').resolve()}"


def outcome(status="completed", events=1, reached_at=None, seconds=None, final=3.2,
            diverged_step=None, initial=5.5, attn=None, response=None,
            cleaning=None) -> dict[str, Any]:
    """One seed's outcome: spike events (each one at a fixed step), the step the target
    was reached at (None: missed), wall seconds to it, final and initial validation loss,
    the largest attention logit (None: not probed)."""
    return {"status": status, "events": events, "reached_at": reached_at,
            "seconds": seconds, "final": final, "diverged_step": diverged_step,
            "initial": initial, "attn": attn, "response": response, "cleaning": cleaning}


def default_outcome(arm: str, seed: int) -> dict[str, Any]:
    """Baseline: spiky, reaches the target on one seed in three; the recipe: calm and
    reaches it on every seed; other arms in between; search trials vary by seed."""
    if arm == "baseline":
        return outcome(events=3, reached_at=80 if seed == 0 else None,
                       seconds=8.0 if seed == 0 else None, final=3.1 + 0.1 * seed)
    if arm == "recipe":
        return outcome(events=1, reached_at=60 + 5 * seed, seconds=6.0 + 0.5 * seed,
                       final=2.8 + 0.02 * seed)
    if arm == "search" and seed == 2:
        return outcome(status="diverged", events=2, diverged_step=40, final=None)
    return outcome(events=2, reached_at=70 + 5 * seed if seed < 2 else None,
                   seconds=7.0 + seed if seed < 2 else None, final=3.0 + 0.05 * seed)


def _distributions(space: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in space:
        if p.get("choices") is not None:
            out[p["key"]] = CategoricalDistribution(p["choices"])
            continue
        if p.get("off"):
            out[p["key"] + "/on"] = CategoricalDistribution([True, False])
        out[p["key"]] = FloatDistribution(p.get("low", 0.0), p["high"], log=p.get("log", False))
    return out


def _params(space: list[dict[str, Any]], values: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in space:
        v = values[p["key"]]
        if p.get("off"):
            out[p["key"] + "/on"] = v is not None
            if v is None:
                continue
        out[p["key"]] = v
    return out


def _curve(o: dict[str, Any], seed: int, steps: int) -> tuple[list[dict], list[dict]]:
    """Metric rows and spike events of one seed: a decaying loss with a bump per event."""
    onsets = [20 + 25 * i for i in range(o["events"])]
    last = o["diverged_step"] or steps
    rows: list[dict[str, Any]] = [{STEP: 0, VAL_LOSS: o["initial"], TOKENS: 0, ELAPSED_S: 0.0}]
    for step in range(1, last + 1):
        loss = 2.6 + 2.9 * math.exp(-step / 15) + 0.01 * ((step * 7 + seed) % 5)
        loss += sum(2.0 for s in onsets if s <= step < s + 3)
        if o["diverged_step"] and step == last:
            loss = float("nan")
        row = {STEP: step, TRAIN_LOSS: loss if math.isfinite(loss) else None,
               GRAD_NORM: 1.0, LR_METRIC: 1e-2, TOKENS: step * 512}
        if step % 20 == 0 and not o["diverged_step"]:
            row[VAL_LOSS] = (o["final"] if step == steps else loss)
        rows.append(row)
    events = [{"onset": s, "peak": s + 1, "metric": TRAIN_LOSS, "height_sigma": 12.0,
               "recovery_steps": 4, "area": 6.0, "recovered": True} for s in onsets]
    return rows, events


def _write_seed(d: Path, o: dict[str, Any], seed: int, steps: int, precision: str) -> dict:
    d.mkdir(parents=True, exist_ok=True)
    rows, events = _curve(o, seed, steps)
    reached = o["reached_at"] is not None
    summary = {
        "status": o["status"], "steps": o["diverged_step"] or steps, "seconds": 10.0 + seed,
        "diverged_step": o["diverged_step"], "initial_val_loss": o["initial"],
        "final_val_loss": o["final"], "max_attn_logit": o["attn"], "response": o["response"],
        "spikes": {"rule": "default", "events": events, "n_events": len(events),
                   "total_severity": 6.0 * len(events),
                   "time_to_target": {"target": TARGET, "reached": reached,
                                      "steps": o["reached_at"], "seconds": o["seconds"]}},
    }
    meta = {"environment": {"python": "3.11.7", "torch": "2.13.0+cpu", "device": "cpu",
                            "platform": "Linux-test", "git": "abc123"},
            "precision": precision, "precision_impl": "emulated" if precision != "fp32" else
            "none", "corpus": {"source": "stdlib", "bytes": 300000, "sha256": "f" * 64,
                               **({"cleaning": o["cleaning"]} if o.get("cleaning") else {})},
            "injections": [{"kind": "random_bytes", "first_step": 50, "last_step": 55}]}
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "summary.json").write_text(json.dumps(summary))
    (d / "meta.json").write_text(json.dumps(meta))
    (d / "config.json").write_text(json.dumps({"spikes": {"detector": "default", "gap": 5}}))
    return summary


def make_study(root: Path, *, folder: str = "fix", name: str | None = None,
               arms: dict[str, dict[str, Any]] | None = None, seeds=(0, 1, 2),
               search: int = 2, space: list[dict[str, Any]] | None = None,
               baseline: dict[str, Any] | None = None, objective: str = "multi",
               outcomes: dict[str, list[dict[str, Any]]] | None = None,
               failed: int = 0, folders: bool = True, steps: int = STEPS,
               spike_metric: str = "severity", rng_seed: int = 0,
               search_values: list[dict[str, Any]] | None = None, outcome_of=None,
               grid: dict[str, list] | None = None) -> Path:
    """Build ``root/folder`` as a sweep leaves it and return that folder.

    ``arms`` maps arm names to their changes from ``baseline`` (``{}``: no designed
    comparison); ``outcomes[arm]`` lists one :func:`outcome` per seed (else
    :func:`default_outcome`); ``failed`` adds search trials that crashed; ``folders=False``
    leaves the trial folders out (a study copied without its logs); ``search_values`` gives
    the search trials' values (else sampled); ``outcome_of(arm, values, seed)`` the outcome
    of any trial (before ``outcomes``); ``grid`` is stored as the spec's comparison grid.
    """
    space = SPACE if space is None else space
    arms = ARMS if arms is None else arms
    baseline = BASELINE if baseline is None else baseline
    outcomes = outcomes or {}
    study_dir = root / folder
    study_dir.mkdir(parents=True)
    baseline = dict(baseline)
    for p in space:  # space keys the baseline does not name: a middle value
        if p["key"] not in baseline:
            lo, hi = p.get("low", 0.0), p.get("high", 0.0)
            baseline[p["key"]] = (p["choices"][0] if p.get("choices") else
                                  math.sqrt(lo * hi) if p.get("log") else (lo + hi) / 2)
    full_arms = {a: {**baseline, **changes} for a, changes in arms.items()}
    spec = {"path": "sweeps/test.toml", "name": name or folder, "trials": search,
            "seeds": list(seeds), "objective": objective, "target_loss": TARGET,
            "spike_limit": 2.0, "spike_metric": spike_metric, "sampler": "tpe",
            "pruner": "none", "storage": "", "base": {"train.steps": steps,
                                                     "schedule.kind": "cosine"},
            "space": space, "arms": full_arms, "steps": steps, "eval_every": 20,
            "notes": "", "extra": {}, **({"grid": grid} if grid else {})}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = storage_url(study_dir)
    study = optuna.create_study(
        storage=storage, study_name=name or folder,
        directions=["minimize", "minimize"] if objective == "multi" else ["minimize"])
    study.set_user_attr("spec", spec)
    study.set_user_attr("target_trials", len(arms) + search)
    dists = _distributions(space)
    rng = random.Random(rng_seed)
    plan = [(a, v) for a, v in full_arms.items()]
    for i in range(search):
        if search_values is not None:
            plan.append(("search", dict(search_values[i])))
            continue
        values = {}
        for p in space:
            if p.get("choices") is not None:
                values[p["key"]] = rng.choice(p["choices"])
            elif p.get("off") and rng.random() < 0.3:
                values[p["key"]] = None
            else:
                lo, hi = p.get("low", 0.0), p["high"]
                values[p["key"]] = (math.exp(rng.uniform(math.log(lo), math.log(hi)))
                                    if p.get("log") else rng.uniform(lo, hi))
        plan.append(("search", values))
    plan += [("search", dict(plan[-1][1] if search else baseline))] * failed
    n_ok = len(plan) - failed
    for number, (arm, values) in enumerate(plan):
        trial_dir = study_dir / "trials" / f"{number:05d}"
        params = _params(space, values)
        attrs: dict[str, Any] = {"arm": arm, "dir": str(trial_dir), "overrides": values}
        if number >= n_ok:
            attrs["error"] = "RuntimeError: CUDA out of memory | `bad` <b>"
            study.add_trial(optuna.trial.create_trial(
                state=TrialState.FAIL, params=params,
                distributions={k: dists[k] for k in params}, user_attrs=attrs))
            continue
        precision = {"bf16": "bf16 (emulated)", "fp16": "fp16+scaling (emulated)"}.get(
            str(values.get("precision.mode")), "fp32")
        per_seed = []
        for i, seed in enumerate(seeds):
            o = (outcome_of(arm, values, seed) if outcome_of else outcomes[arm][i]
                 if arm in outcomes else default_outcome(arm, seed))
            if folders:
                summary = _write_seed(trial_dir / f"seed-{seed}", o, seed, steps, precision)
            else:
                summary = {"status": o["status"], "diverged_step": o["diverged_step"],
                           "initial_val_loss": o["initial"], "final_val_loss": o["final"],
                           "max_attn_logit": o["attn"], "response": o["response"],
                           "seconds": 10.0,
                           "spikes": {"n_events": o["events"], "total_severity": 6.0 * o[
                               "events"], "time_to_target": {
                               "reached": o["reached_at"] is not None,
                               "steps": o["reached_at"], "seconds": o["seconds"]}}}
            per_seed.append({"seed": seed, **objectives.seed_values(summary, steps=steps,
                                                                    target=TARGET)})
        if folders:
            (trial_dir / "trial.json").write_text(json.dumps(
                {"number": number, "arm": arm, "params": params, "overrides": values,
                 "seeds": list(seeds), "config": {"spikes": {"detector": "default",
                                                             "gap": 5}}}))
        agg = objectives.aggregate(per_seed, spike_metric=spike_metric, steps=steps)
        attrs.update({"per_seed": per_seed, **agg})
        study.add_trial(optuna.trial.create_trial(
            state=TrialState.COMPLETE, params=params,
            distributions={k: dists[k] for k in params}, user_attrs=attrs,
            values=objectives.objective_values(agg, objective)))
    return study_dir


XSS_NAME = "<script>alert(1)</script>"
XSS_ARM = '<img src=x onerror="alert(2)">|`arm`'
XSS_CHOICE = "</td><script>alert(3)</script>"


def make_xss_study(root: Path, folder: str = "xss") -> Path:
    """A study whose name, arm names, a parameter's values and an error message are all
    markup: a report must show each as text."""
    space = SPACE + [{"key": "data.note", "choices": ["plain", XSS_CHOICE]}]
    arms = {"baseline": {}, XSS_ARM: {"data.note": XSS_CHOICE}, "recipe": ARMS["recipe"]}
    return make_study(root, folder=folder, name=XSS_NAME, arms=arms, space=space,
                      baseline={**BASELINE, "data.note": "plain"}, search=2, failed=1)


# An LR grid study (the LR-stability scenario's shape): three settings at three LRs.
LR_GRID = [0.003, 0.03, 0.3]
GRID_ARMS = {"baseline": {}, "clip 1.0": {"optim.clip": 1.0},
             "qk-layernorm": {"model.qk_norm": True}}
GRID_FINALS = {"baseline": (3.0, 2.8, 4.0), "clip 1.0": (3.0, 2.8, 3.5),
               "qk-layernorm": (3.0, 2.75, 2.9)}


def _grid_setting(values: dict[str, Any]) -> str:
    if values.get("model.qk_norm"):
        return "qk-layernorm"
    return "clip 1.0" if values.get("optim.clip") is not None else "baseline"


def lr_outcome(values: dict[str, Any], seed: int) -> dict[str, Any]:
    """Final loss rises at the top LR except with qk-layernorm; the baseline's seed 5
    diverges there; attention logits grow with the LR except with qk-layernorm."""
    setting, i = _grid_setting(values), LR_GRID.index(values["optim.lr"])
    if setting == "baseline" and i == 2 and seed == 5:
        return outcome(status="diverged", diverged_step=40, final=None, attn=9000.0)
    attn = 10.0 if setting == "qk-layernorm" else 5.0 * 10 ** (1.5 * i) * (1 + 0.1 * seed)
    return outcome(final=GRID_FINALS[setting][i] + 0.01 * seed, attn=attn)


def make_lr_study(root: Path, folder: str, *, via: str = "arms", seeds=tuple(range(6)),
                  outcome_of=lr_outcome, folders: bool = False) -> Path:
    """The same LR grid run through comparison arms crossed with a grid (``via="arms"``)
    or through search trials over categorical dimensions (``via="search"``)."""
    base = 0.03  # the base config's LR: those arms keep their plain names
    if via == "arms":
        arms = {(arm if lr == base else f"{arm} @ optim.lr={lr:g}"): {**ch, "optim.lr": lr}
                for arm, ch in GRID_ARMS.items() for lr in LR_GRID}
        return make_study(root, folder=folder, arms=arms, space=[], baseline={}, search=0,
                          seeds=seeds, grid={"optim.lr": LR_GRID}, folders=folders,
                          outcome_of=lambda a, v, s: outcome_of(v, s))
    space = [{"key": "optim.lr", "choices": LR_GRID},
             {"key": "optim.clip", "choices": [None, 1.0]},
             {"key": "model.qk_norm", "choices": [False, True]}]
    values = [{"optim.lr": lr, "optim.clip": c, "model.qk_norm": q}
              for c, q in ((None, False), (1.0, False), (None, True)) for lr in LR_GRID]
    return make_study(root, folder=folder, arms={}, space=space, search=len(values),
                      search_values=values, seeds=seeds, folders=folders,
                      outcome_of=lambda a, v, s: outcome_of(v, s))
