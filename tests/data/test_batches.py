import functools
import json

import numpy as np
import pytest
import torch

from spikebench.config import load
from spikebench.data.batches import BatchStream
from spikebench.data.corpus import load_corpus
from spikebench.data.curriculum import window_entropy
from spikebench.data.seeds import derive_seed
from spikebench.data.windows import gather_windows
from spikebench.errors import UserError

torch.set_num_threads(1)

B, T, STEPS = 4, 32, 40
BASE = [f"data.batch_size={B}", f"data.seq_len={T}", "data.max_bytes=60000", f"train.steps={STEPS}"]


def make_cfg(*overrides):
    return load(None, [*BASE, *overrides])


@functools.cache
def corpus():
    return load_corpus(make_cfg())


def stream(*overrides, data=None):
    return BatchStream(data or corpus(), make_cfg(*overrides), torch.device("cpu"))


def as_bytes(row: torch.Tensor) -> bytes:
    return bytes(row.tolist())


def test_shapes_dtype_and_shift():
    x, y = stream().batch(0)
    assert x.shape == y.shape == (B, T) and x.dtype == y.dtype == torch.int64
    assert x.is_contiguous() and y.is_contiguous()
    assert torch.equal(x[:, 1:], y[:, :-1])
    # Every row is a real window of the train split.
    train = as_bytes(corpus().train)
    assert all(as_bytes(torch.cat([r, r2[-1:]])) in train for r, r2 in zip(x, y, strict=True))


def test_same_seed_same_batches_other_seed_differs():
    a, b, c = stream(), stream(), stream("train.seed=1")
    for step in (0, 1, 17):
        assert all(torch.equal(u, v) for u, v in zip(a.batch(step), b.batch(step), strict=True))
        assert not torch.equal(a.batch(step)[0], c.batch(step)[0])
    assert not torch.equal(a.batch(0)[0], a.batch(1)[0])
    # A pure function of the step: order of calls (e.g. resuming) does not matter.
    assert torch.equal(stream().batch(17)[0], a.batch(17)[0])


def test_batches_ignore_optimiser_precision_and_inactive_faults():
    base = stream()
    other = stream(
        "optim.lr=0.1",
        "optim.clip=1.0",
        "optim.grad_accum=2",
        "precision.mode=bf16",
        "faults.lr_shock_at=0.5",
        "faults.at=0.1",
        "schedule.kind=constant",
    )
    for step in range(0, STEPS, 7):
        assert torch.equal(base.batch(step)[0], other.batch(step)[0])
    assert other.injections == []


def test_val_batches_fixed_and_seed_independent():
    s = stream()
    v = s.val_batches()
    assert len(v) == make_cfg().train.eval_batches
    assert all(x.shape == (B, T) and torch.equal(x[:, 1:], y[:, :-1]) for x, y in v)
    w = stream("train.seed=5", "faults.burst=random_bytes", "faults.rows=1.0").val_batches()
    assert all(torch.equal(a[0], b[0]) for a, b in zip(v, w, strict=True))
    val = as_bytes(corpus().val)
    assert as_bytes(v[0][0][0]) == val[:T]  # first window starts the split
    assert as_bytes(v[-1][1][-1]) == val[-T:]  # last window ends it


# -- curricula -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "start, expected",
    [
        # ramp R = 0.5 * 40 = 20 steps; length = start + (32 - start) * step / 20, floored to 8s
        (8, {0: 8, 6: 8, 7: 16, 13: 16, 14: 24, 19: 24, 20: 32, 39: 32}),
        (12, {0: 12, 2: 12, 7: 16, 19: 24, 20: 32}),  # clamped up to seqlen_start
    ],
)
def test_seqlen_schedule_and_prefix_windows(start, expected):
    s = stream("curriculum.kind=seqlen", "curriculum.ratio=0.5", f"curriculum.seqlen_start={start}")
    base = stream()
    for step, length in expected.items():
        assert s.seq_len_at(step) == length
        x, y = s.batch(step)
        bx, by = base.batch(step)
        assert x.shape == (B, length)
        assert torch.equal(x, bx[:, :length]) and torch.equal(y, by[:, :length])


def pool_entropies(step, pool_factor=4):
    """Entropies of the easy_first candidate pool, rebuilt from the documented draws."""
    g = torch.Generator().manual_seed(derive_seed(0, "data", step))
    hi = len(corpus().train) - T
    offsets = torch.cat(
        [
            torch.randint(0, hi, (B,), generator=g),
            torch.randint(0, hi, ((pool_factor - 1) * B,), generator=g),
        ]
    )
    return window_entropy(gather_windows(corpus().train, offsets, T + 1))


def test_easy_first_starts_easy_and_joins_baseline_after_ramp():
    s = stream("curriculum.kind=easy_first", "curriculum.ratio=0.5")
    base = stream()
    for step in (0, 3):
        x, y = s.batch(step)
        full = torch.cat([x, y[:, -1:]], dim=1)
        # Step 0: eligible = the B easiest of the pool, so the batch is exactly those.
        if step == 0:
            expected = pool_entropies(0).sort().values[:B]
            assert torch.allclose(window_entropy(full).sort().values, expected)
        assert (
            window_entropy(full).mean()
            < window_entropy(
                torch.cat([base.batch(step)[0], base.batch(step)[1][:, -1:]], dim=1)
            ).mean()
        )
    # Mid-ramp: eligible are the easiest max(B, round(frac * 16)), frac = 1/4 + 3/4 * 10/20.
    x, y = s.batch(10)
    ent = window_entropy(torch.cat([x, y[:, -1:]], dim=1))
    assert ent.max() <= pool_entropies(10).sort().values[round(0.625 * 16) - 1] + 1e-6
    for step in (20, 21, 39):
        assert torch.equal(s.batch(step)[0], base.batch(step)[0])


def test_both_curricula_combine():
    s = stream("curriculum.kind=both", "curriculum.ratio=0.5", "curriculum.seqlen_start=8")
    x, _ = s.batch(0)
    assert x.shape == (B, 8)
    assert torch.equal(s.batch(25)[0], stream().batch(25)[0])


# -- stream faults -------------------------------------------------------------------------------

FAULT = ["faults.at=0.25", "faults.length=5", "faults.rows=0.5"]  # steps 10..14, 2 rows


@pytest.mark.parametrize("burst", ["random_bytes", "repeat", "domain"])
def test_stream_injection_hits_exact_steps_and_rows(burst):
    s, base = stream(*FAULT, f"faults.burst={burst}"), stream()
    assert s.injections == [
        {"kind": burst, "target": "stream", "first_step": 11, "last_step": 15, "rows": 2}
    ]
    injected = []
    for step in range(STEPS):
        (x, y), (bx, by) = s.batch(step), base.batch(step)
        assert torch.equal(x[2:], bx[2:]) and torch.equal(y[2:], by[2:])
        assert torch.equal(x[:, 1:], y[:, :-1])  # x and y replaced consistently
        if not torch.equal(x[:2], bx[:2]):
            injected.append(step)
        if 10 <= step < 15:
            assert (x[:2] != bx[:2]).float().mean() > 0.5
            assert x.max() < 256
            if burst == "domain":
                assert set(x[:2].flatten().tolist()) <= set(b"0123456789.,-\n")
            if burst == "repeat":
                assert torch.equal(x[0], x[1]) and torch.equal(x[0], s.batch(10)[0][0])
    assert injected == list(range(10, 15)) == list(s.fault_steps)


def test_stream_injection_rows_rounding_and_what_would_inject_less_is_refused():
    s = stream("data.batch_size=10", "faults.burst=random_bytes", "faults.rows=0.3")
    assert s.injections[0]["rows"] == 3  # not ceil(3.0000000000000004) = 4
    s = stream("faults.burst=repeat", "faults.at=0.9", "faults.length=4")
    assert s.fault_steps == range(36, 40)
    assert (s.injections[0]["first_step"], s.injections[0]["last_step"]) == (37, 40)
    assert stream("faults.burst=repeat", "faults.target=corpus").injections == []
    # A burst cut short, one that starts after the last step, or one of no rows would
    # record an injection it did not make: refused, in one line.
    for over, needle in ((["faults.at=0.9", "faults.length=20"], "at most 4"),
                         (["faults.at=1.0"], "faults.at = 1.0"),
                         (["faults.rows=1e-300"], "faults.rows = 1e-300")):
        with pytest.raises(UserError, match=needle):
            stream("faults.burst=repeat", *over)


def test_domain_corpus_file_feeds_stream(tmp_path):
    (tmp_path / "dom.txt").write_bytes(b"zzz yyy xxx\n" * 50)
    s = stream(
        *FAULT,
        "faults.burst=domain",
        f"faults.domain_corpus={json.dumps(str(tmp_path / 'dom.txt'))}",
    )
    assert set(s.batch(12)[0][:2].flatten().tolist()) <= set(b"zyx \n")


def test_bin_corpus_stream_with_faults_and_curriculum(tmp_path):
    tokens = (np.arange(20000) * 7919 % 5000).astype(np.uint16)
    tokens.tofile(tmp_path / "tok.bin")
    over = [f"data.corpus={json.dumps(str(tmp_path / 'tok.bin'))}", "model.vocab_size=5000"]
    data = load_corpus(make_cfg(*over))
    s = BatchStream(
        data,
        make_cfg(*over, *FAULT, "faults.burst=random_bytes", "curriculum.kind=easy_first"),
        "cpu",
    )
    x, y = s.batch(30)
    (off,) = np.nonzero(tokens[: len(tokens) - T] == x[0, 0].item())
    assert any(np.array_equal(tokens[o : o + T], x[0].numpy()) for o in off)
    fx, _ = s.batch(12)
    assert fx.max() < 5000 and fx.max() >= 256  # uniform over the model vocab
    assert s.val_batches()[0][0].dtype == torch.int64
