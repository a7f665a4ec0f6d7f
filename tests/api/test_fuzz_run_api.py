"""Fuzzing the run API and the callbacks' arguments (issue 45): whatever a loop logs or a
script passes to ``spikebench.init`` or a callback, the answer is a value kept as the
number it is, or one ``UserError`` line at that call; never another exception, never a
value kept as something else (a string, a boolean, a list), never a moved step."""

from __future__ import annotations

import itertools
import json
import math
import numbers
import tempfile

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spikebench
from spikebench import metrics as M
from spikebench.errors import UserError
from spikebench.integrations.loop import SpikebenchLoop
from spikebench.spikes.rules import RULES

CASES = settings(max_examples=60, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])
NUMPY = st.sampled_from([np.float16, np.float32, np.float64, np.int8, np.int64, np.uint32,
                         np.bool_, np.complex64])
DTYPES = st.sampled_from([torch.float32, torch.float64, torch.bfloat16, torch.int64,
                          torch.bool, torch.complex64])
VALUES = st.one_of(
    st.none(), st.booleans(), st.floats(), st.integers(-10**30, 10**30),
    st.integers(min_value=10**300, max_value=10**400), st.text(max_size=5),
    st.complex_numbers(max_magnitude=1e6), st.lists(st.floats(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.floats(), max_size=1),
    st.builds(lambda t, x: t(x), NUMPY, st.integers(0, 100)),
    st.builds(lambda d, n: torch.ones([1] * n if n < 3 else [n - 1], dtype=d), DTYPES,
              st.integers(0, 4)),
    st.builds(lambda n: np.ones(n), st.integers(0, 3)))
KEYS = st.one_of(st.sampled_from(["loss", "grad_norm", "lr", "val_loss", "tokens",
                                  "train/loss", "step", M.SPIKE_EVENTS, ""]),
                 st.text(min_size=1, max_size=8), st.integers(), st.none())


def _real(v) -> float | None:
    """The number ``v`` is, or None if it is not a real number to log."""
    if v is None or isinstance(v, bool | np.bool_ | str | list | dict | complex):
        return None
    if isinstance(v, torch.Tensor):
        if v.numel() != 1 or v.dtype in (torch.bool, torch.complex64):
            return None
        return float(v.float().reshape(()))
    if isinstance(v, np.ndarray | np.generic):
        if v.size != 1 or v.dtype.kind in "bc":
            return None
        return float(v.reshape(()))
    if isinstance(v, int) and not -2**63 <= v < 2**63:
        return None
    return float(v) if isinstance(v, numbers.Real) else None


@pytest.fixture(scope="module")
def run():
    with tempfile.TemporaryDirectory() as d:
        r = spikebench.init(run_dir=f"{d}/r", sync_every=1)
        r.steps = itertools.count(1)
        yield r
        r.finish()


@CASES
@given(items=st.lists(st.tuples(KEYS, VALUES), max_size=3))
def test_a_logged_value_is_kept_as_its_number_or_refused_at_the_call(run, items):
    step = next(run.steps)
    metrics = dict(items)
    names = [spikebench.api.run.ALIASES.get(k, k) for k, v in metrics.items()
             if v is not None and isinstance(k, str)]
    good = all(isinstance(k, str) and k and k not in ("step", M.SPIKE_EVENTS)
               for k, v in metrics.items() if v is not None) and len(names) == len(set(names))
    good = good and all(_real(v) is not None for v in metrics.values() if v is not None)
    before = run.dir.joinpath("metrics.jsonl.partial").read_text().count("\n")
    try:
        run.log(step, metrics)
    except UserError as e:
        assert "\n" not in str(e) and str(e).startswith("log("), str(e)
        assert not good, f"{metrics!r} refused: {e}"
        return
    assert good, f"{metrics!r} silently accepted"
    lines = run.dir.joinpath("metrics.jsonl.partial").read_text().splitlines()
    assert len(lines) == before + 1
    row = json.loads(lines[-1])
    assert row[M.STEP] == step
    for k, v in metrics.items():
        if v is not None:
            got, want = row[spikebench.api.run.ALIASES.get(k, k)], _real(v)
            assert isinstance(got, int | float) and not isinstance(got, bool), (k, v, got)
            assert got == want or math.isnan(want) and got != got or abs(
                got - want) <= 1e-6 * abs(want) or not math.isfinite(got), (k, v, got)


INIT = st.fixed_dictionaries({}, optional={
    "seed": st.one_of(st.integers(-5, 2**40), st.text(max_size=3), st.floats(), st.booleans()),
    "gap": st.one_of(st.integers(-3, 10), st.text(max_size=2), st.floats()),
    "detector": st.one_of(st.sampled_from(["default", "zscore", "magic", ""]), st.integers()),
    "target_loss": st.one_of(st.floats(), st.text(max_size=3), st.booleans()),
    "sync_every": st.one_of(st.integers(-2, 5), st.floats(), st.text(max_size=2)),
    "params": st.one_of(st.text(max_size=3), st.dictionaries(st.text(max_size=2),
                                                            st.floats(), max_size=2),
                        st.builds(lambda: {"f": object()}), st.lists(st.integers())),
    "sinks": st.one_of(st.lists(st.integers(), max_size=2), st.text(max_size=2)),
    "metrics_port": st.one_of(st.integers(-5, 70000), st.text(max_size=2)),
    "bogus": st.integers()})


def _int(v, low, high=2**63):
    return isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def _valid(kw) -> bool:
    """Whether ``spikebench.init(**kw)`` must take ``kw`` (the documented rules)."""
    tl = kw.get("target_loss")
    params = kw.get("params", {})
    return ("bogus" not in kw and _int(kw.get("seed", 0), 0, 2**32 - 1)
            and _int(kw.get("gap", 5), 0) and kw.get("detector", "default") in RULES
            and (tl is None or isinstance(tl, float) and math.isfinite(tl))
            and _int(kw.get("sync_every", 1), 1) and isinstance(params, dict)
            and all(isinstance(v, float) for v in params.values())
            and kw.get("sinks", []) == [] and _int(kw.get("metrics_port", 0), 0, 65535))


@CASES
@given(kwargs=INIT, where=st.sampled_from(["init", "loop"]))
def test_init_and_callback_arguments_are_taken_or_one_line(tmp_path, kwargs, where):
    """Built, a callback makes no run; what it took, ``init`` takes too (no later error)."""
    kwargs.pop("metrics_port", None) if where == "init" else None  # no server in a fuzz
    folder = tempfile.mkdtemp(dir=tmp_path)
    valid = _valid(kwargs)
    try:
        if where == "loop":
            SpikebenchLoop(run_dir=f"{folder}/r", **kwargs)
            kwargs.pop("metrics_port", None)
        spikebench.init(run_dir=f"{folder}/r", **kwargs).finish()
    except UserError as e:
        assert "\n" not in str(e), str(e)
        assert not valid, f"{kwargs!r} refused: {e}"
        return
    assert valid, f"{kwargs!r} silently accepted"
