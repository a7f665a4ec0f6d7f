import contextlib
import copy
import json
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from spikebench import config as c
from spikebench import precision_auto
from spikebench.config import PrecisionConfig
from spikebench.model import GPT
from spikebench.precision import (
    EmulatedAutocast,
    loss_scale_tensor,
    make_precision,
    round_to,
)

torch.set_num_threads(1)

CPU = torch.device("cpu")
BF16, FP16 = torch.bfloat16, torch.float16


def _prec(mode, impl="auto", **kw):
    return make_precision(PrecisionConfig(mode=mode, impl=impl, **kw), CPU)


def _r(t, dtype):
    return t.to(dtype).to(torch.float32)


# ----------------------------------------------------------------------------------------
# make_precision


@pytest.mark.parametrize(
    "mode, label",
    [
        ("fp32", "fp32"),
        ("bf16", "bf16 (emulated)"),
        ("fp16", "fp16+scaling (emulated)"),
        ("fp16_noscale", "fp16 no scaling (emulated)"),
    ],
)
def test_cpu_emulated_labels_and_contexts(mode, label):
    p = _prec(mode, "emulated")
    assert p.mode == mode and p.label == label
    assert p.impl == ("none" if mode == "fp32" else "emulated")
    ctx = p.autocast()
    if mode == "fp32":
        assert isinstance(ctx, contextlib.nullcontext)
    else:
        assert isinstance(ctx, EmulatedAutocast)
        assert ctx.dtype == (BF16 if mode == "bf16" else FP16)
    if mode == "fp16":
        assert isinstance(p.scaler, torch.amp.GradScaler) and p.scaler.is_enabled()
        assert p.scaler.get_scale() == 2.0**16
    else:
        assert p.scaler is None


def test_cpu_auto_emulates_without_a_native_unit_and_measures_once_with_one(
        tmp_path, monkeypatch):
    monkeypatch.setenv("SPIKEBENCH_CACHE", str(tmp_path))
    impl, why = precision_auto.choose("bf16", flags={"avx2", "avx512f"})
    assert impl == "emulated" and why.startswith("no native bf16 on this CPU")
    assert not (tmp_path / "precision.json").exists()  # nothing measured
    calls = []
    monkeypatch.setattr(precision_auto, "measure", lambda fmt: calls.append(fmt) or 0.8)
    assert precision_auto.choose("bf16", flags={"amx_bf16"})[0] == "real"
    assert precision_auto.choose("fp16_noscale", flags={"avx512_fp16"})[0] == "real"
    again, why = precision_auto.choose("bf16", flags={"amx_bf16"})
    assert again == "real" and calls == ["bf16", "fp16"]  # the second bf16 read the cache
    assert "0.80" in why and str(tmp_path) in why
    cache = json.loads((tmp_path / "precision.json").read_text())
    key = next(k for k in cache if k.endswith("| bf16"))
    cache[key] = 1.3  # real slower than the emulation there
    (tmp_path / "precision.json").write_text(json.dumps(cache))
    assert precision_auto.choose("bf16", flags={"amx_bf16"})[0] == "emulated"


def test_measuring_leaves_the_random_streams_alone(tmp_path):
    torch.manual_seed(7)
    before = torch.random.get_rng_state()
    ratio = precision_auto.measure("bf16", steps=1)
    assert ratio > 0 and torch.equal(torch.random.get_rng_state(), before)


@pytest.mark.parametrize("mode, dtype", [("bf16", BF16), ("fp16", FP16), ("fp16_noscale", FP16)])
def test_impl_real_forces_real_autocast_on_cpu(mode, dtype):
    p = _prec(mode, "real")
    assert p.impl == "real" and p.label.endswith("(real autocast)")
    with p.autocast():
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == dtype
        assert F.linear(torch.randn(2, 4), torch.randn(3, 4)).dtype == dtype
    assert not torch.is_autocast_enabled("cpu")


def test_auto_is_real_on_cuda_and_fp32_ignores_impl():
    # Building the Precision does not touch the device, so this runs without a GPU (fp16 is
    # left out: GradScaler disables itself when CUDA is missing).
    for mode, label in [
        ("bf16", "bf16 (real autocast)"),
        ("fp16_noscale", "fp16 no scaling (real autocast)"),
    ]:
        p = make_precision(PrecisionConfig(mode=mode), torch.device("cuda"))
        assert (p.impl, p.label, p.device_type) == ("real", label, "cuda")
    p = _prec("fp32", "emulated")
    assert (p.impl, p.label, p.scaler) == ("none", "fp32", None)


def test_init_scale_and_loss_scale_tensor():
    assert loss_scale_tensor(None) is None
    assert loss_scale_tensor(torch.amp.GradScaler("cpu", enabled=False)) is None
    scaler = _prec("fp16", init_scale=1024.0).scaler
    before = loss_scale_tensor(scaler)  # no scale() yet: the initial value
    assert before.shape == () and before.dtype == torch.float32 and before.item() == 1024.0

    w = nn.Parameter(torch.ones(3))
    opt = torch.optim.AdamW([w], fused=True)
    scaler.scale((w * math.inf).sum()).backward()  # an overflowing step
    scaler.unscale_(opt)
    snap = loss_scale_tensor(scaler)
    scaler.step(opt)
    scaler.update()
    assert torch.equal(w.detach(), torch.ones(3))  # the step was skipped
    assert snap.item() == 1024.0  # a snapshot: update() does not reach it
    assert loss_scale_tensor(scaler).item() == 512.0 == scaler.get_scale()


# ----------------------------------------------------------------------------------------
# Rounding


def test_fp16_rounding_overflows_and_underflows_like_the_format():
    x = torch.tensor([70000.0, -70000.0, 65504.0, 65520.0, 1e-6, 2.0**-24, 1e-8, 1e-30])
    y = round_to(x, FP16)
    assert y.dtype == torch.float32
    # 65520 is the midpoint to the next (unrepresentable) power of two: ties-to-even -> inf.
    assert y[:4].tolist() == [math.inf, -math.inf, 65504.0, math.inf]
    # 1e-6 is subnormal in fp16: spacing 2**-24, so it lands on 17 * 2**-24.
    assert y[4].item() == 17 * 2.0**-24 and y[5].item() == 2.0**-24
    assert y[6].item() == 0.0 and y[7].item() == 0.0  # below 2**-25: flushed to zero


def test_bf16_rounding_keeps_fp32_range_with_8_bits():
    y = round_to(torch.tensor([1e30, 1e-30, 1 + 2.0**-8, 1 + 3 * 2.0**-9]), BF16)
    assert math.isfinite(y[0].item()) and abs(y[0].item() / 1e30 - 1) < 2.0**-8
    assert y[1].item() != 0.0
    # Spacing above 1 is 2**-7: a tie rounds to even (1.0), 3/4 of a step rounds up.
    assert y[2].item() == 1.0 and y[3].item() == 1 + 2.0**-7


def test_round_to_leaves_other_dtypes_alone():
    for t in (torch.randn(3, dtype=torch.float64), torch.arange(3), torch.randn(3).half()):
        assert round_to(t, FP16) is t


def test_gradients_are_rounded_in_backward():
    upstream = torch.tensor([1e5, 1e-8, 1e-6, 0.1])
    x = torch.full((4,), 1.1, requires_grad=True)
    y = round_to(x, FP16)
    assert torch.equal(y, _r(x.detach(), FP16))
    y.backward(upstream)
    assert x.grad.tolist() == [math.inf, 0.0, 17 * 2.0**-24, _r(torch.tensor(0.1), FP16).item()]

    x.grad = None
    y = round_to(x, FP16, forward=False)  # gradient only
    assert torch.equal(y, x.detach())
    y.backward(upstream)
    assert x.grad[0].item() == math.inf

    x.grad = None
    y = round_to(x, FP16, backward=False)  # value only (straight-through)
    assert torch.equal(y, _r(x.detach(), FP16))
    y.backward(upstream)
    assert torch.equal(x.grad, upstream)


# ----------------------------------------------------------------------------------------
# EmulatedAutocast


def test_emulated_autocast_rounds_matmul_inputs_and_outputs_only():
    torch.manual_seed(0)
    a, b = torch.randn(3, 5, 7), torch.randn(3, 7, 4)
    w, bias, m = torch.randn(6, 7), torch.randn(6), torch.randn(5, 4)
    ra, rb, rw, rbias, rm = (_r(t, BF16) for t in (a, b, w, bias, m))
    cases = [
        (lambda: F.linear(a, w, bias), lambda: F.linear(ra, rw, rbias)),
        (lambda: a @ b, lambda: ra @ rb),
        (lambda: torch.matmul(a, b), lambda: ra @ rb),
        (lambda: a.matmul(b), lambda: ra @ rb),
        (lambda: torch.bmm(a, b), lambda: ra @ rb),
        (lambda: a[0].mm(b[0]), lambda: ra[0] @ rb[0]),
        (lambda: torch.addmm(m, a[0], b[0]), lambda: rm + ra[0] @ rb[0]),
        (lambda: torch.einsum("bij,bjk->bik", [a, b]), lambda: ra @ rb),
    ]
    for emulated, reference in cases:
        with EmulatedAutocast(BF16):
            got = emulated()
        want = _r(reference(), BF16)
        # Same rounded inputs; one bf16 step of slack where the reference sums differently.
        torch.testing.assert_close(got, want, rtol=2.0**-8, atol=0)
        assert torch.equal(got, _r(got, BF16))  # the output itself is rounded
    untouched = [F.layer_norm(a, (7,)), torch.softmax(a, -1), F.gelu(a), a * 1.1]
    with EmulatedAutocast(BF16):
        # fp32 ops (layer norm, softmax, GELU, elementwise) are left alone.
        again = [F.layer_norm(a, (7,)), torch.softmax(a, -1), F.gelu(a), a * 1.1]
    assert all(torch.equal(u, g) for u, g in zip(untouched, again, strict=True))
    assert not torch.equal(a @ b, _r(a @ b, BF16))  # the context is gone


def test_a_half_result_is_not_rounded_again_until_it_changes_in_place():
    """A result already rounded (and views of it) goes into the next half op as it is, with
    the same values as if rounded again; once changed in place it is rounded again."""
    torch.manual_seed(0)
    x, w = torch.randn(4, 8), torch.randn(6, 8)
    col = torch.ones(3, 1)
    with EmulatedAutocast(BF16):
        y = F.linear(x, w)  # (4, 6), half values
        view = y.view(8, 3)
        again = view @ col
        y.add_(torch.full_like(y, 2.0**-12))  # no longer half values
        changed = y.view(8, 3) @ col
    want_again = _r(_r(view, BF16) @ col, BF16)
    assert torch.equal(again, want_again)
    assert torch.equal(changed, _r(_r(y.view(8, 3), BF16) @ col, BF16))
    assert not torch.equal(changed, _r(y.view(8, 3) @ col, BF16))  # the rounding mattered


def test_emulated_autocast_under_inference_mode():
    torch.manual_seed(0)
    x, w1, w2 = torch.randn(4, 8), torch.randn(6, 8), torch.randn(5, 6)
    with torch.inference_mode(), EmulatedAutocast(BF16):
        got = F.linear(F.linear(x, w1), w2)
    want = _r(F.linear(_r(F.linear(_r(x, BF16), _r(w1, BF16)), BF16), _r(w2, BF16)), BF16)
    assert torch.equal(got, want)


def test_a_skipped_rounding_changes_no_gradient_of_a_single_use():
    """The second linear takes the first's rounded result as it is. The grads equal those
    of rounding it again at the second's input (rounding is idempotent, forward and back)."""
    torch.manual_seed(0)
    x, up = torch.randn(4, 8), torch.randn(4, 5)
    w1, w2 = torch.randn(6, 8) * 0.3, torch.randn(5, 6) * 0.3

    def grads(fn):
        a, b = w1.clone().requires_grad_(), w2.clone().requires_grad_()
        fn(a, b).backward(up)
        return a.grad, b.grad

    def twice(a, b):  # every input and output rounded, as before the skip
        h = round_to(F.linear(round_to(x, BF16), round_to(a, BF16)), BF16)
        return round_to(F.linear(round_to(h, BF16), round_to(b, BF16)), BF16)

    def emulated(a, b):
        with EmulatedAutocast(BF16):
            return F.linear(F.linear(x, a), b)

    for got, want in zip(grads(emulated), grads(twice), strict=True):
        assert torch.equal(got, want)
        assert torch.equal(got, _r(got, BF16))


def _compare(fn, inputs, upstream):
    """Outputs and input grads of ``fn`` as (emulated, real CPU bf16 autocast, fp32)."""
    res = []
    for ctx in (
        lambda: EmulatedAutocast(BF16),
        lambda: torch.autocast("cpu", BF16),
        contextlib.nullcontext,
    ):
        ins = [t.clone().requires_grad_() for t in inputs]
        with ctx():
            out = fn(*ins)
        out.float().backward(upstream)
        res.append([out.detach().float()] + [t.grad for t in ins])
    return zip(*res, strict=True)


def test_emulated_mlp_matches_real_bf16_autocast():
    """Bit-identical on the AVX2 machine this was written on, forward and backward: oneDNN
    multiplies bf16 inputs with fp32 accumulation and rounds the result once, as the
    emulation does. CPUs with native bf16 dot products may sum in another order, hence the
    margin."""
    torch.manual_seed(0)
    x, w1, w2 = torch.randn(4, 16, 32), torch.randn(64, 32) * 0.1, torch.randn(32, 64) * 0.1

    def mlp(x, w1, w2):
        return F.linear(F.gelu(F.linear(x, w1)), w2)

    for emu, real, fp32 in _compare(mlp, [x, w1, w2], torch.randn(4, 16, 32)):
        # output, dx, dw1, dw2
        assert (emu == real).float().mean() > 0.9
        assert (emu - real).abs().mean() < 0.1 * (fp32 - real).abs().mean()


def test_emulated_attention_tracks_the_real_flash_kernel():
    """The CPU kernel rounds exp(s - max) to bf16 before P @ V; so does the emulation.

    Its vectorised exp is not torch.exp, so ~3% of outputs (and a few % of grads) land one
    bf16 step away; without the probability rounding ~30% of the outputs would differ.
    """
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 32, 16) for _ in range(3))

    def attn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    for i, (emu, real, fp32) in enumerate(_compare(attn, [q, k, v], torch.randn(2, 2, 32, 16))):
        err_emu, err_fp32 = (emu - real).abs().mean(), (fp32 - real).abs().mean()
        assert err_emu < 0.2 * err_fp32
        if i == 0:
            assert (emu == real).float().mean() > 0.9
    with EmulatedAutocast(BF16, flash_rounding=False):
        io_only = attn(q, k, v)
    with torch.autocast("cpu", BF16):
        real = attn(q, k, v).float()
    assert (io_only == real).float().mean() < 0.85


def test_emulated_attention_with_far_apart_scores_and_a_causal_mask():
    """Scores 1000 apart put exp(s - max) far below fp32's normal range, where CPU exp is
    slow; the emulation floors it there and zeroes the masked entries after the exp. Each
    query then sees only its own key, so out = v and dv = dout, exactly, in bf16."""
    q = torch.eye(8).repeat(1, 1, 1, 2)[..., :16] * 1000.0  # (1, 1, 8, 16): q_i . k_j = 1e6 d_ij
    k = torch.eye(8).repeat(1, 1, 1, 2)[..., :16]
    torch.manual_seed(0)
    v = _r(torch.randn(1, 1, 8, 16), BF16).requires_grad_()
    up = _r(torch.randn(1, 1, 8, 16), BF16)
    with EmulatedAutocast(BF16):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)
    (dv,) = torch.autograd.grad(out, (v,), up)
    assert torch.equal(out, v.detach())
    assert torch.equal(dv, up)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"is_causal": True, "scale": 0.3},
        {"attn_mask": "bool"},  # with one fully masked row: output 0, finite grads
        {"attn_mask": "float"},
        {"enable_gqa": True},
    ],
)
def test_emulated_attention_options_agree_with_fp32_sdpa(kwargs):
    torch.manual_seed(0)
    kv_heads = 1 if kwargs.get("enable_gqa") else 2
    q = torch.randn(2, 2, 8, 16, requires_grad=True)
    k, v = (torch.randn(2, kv_heads, 8, 16, requires_grad=True) for _ in range(2))
    if kwargs.get("attn_mask") == "bool":
        mask = torch.rand(8, 8) > 0.3
        mask[2] = False
        kwargs = {"attn_mask": mask}
    elif kwargs.get("attn_mask") == "float":
        kwargs = {"attn_mask": torch.randn(2, 1, 8, 8)}
    upstream = torch.randn(2, 2, 8, 16)
    results = []
    for ctx in (lambda: EmulatedAutocast(BF16), contextlib.nullcontext):
        with ctx():
            out = F.scaled_dot_product_attention(q, k, v, **kwargs)
        grads = torch.autograd.grad(out, (q, k, v), upstream)
        results.append((out, *grads))
    # Errors measured: <= 0.64% of the largest |value|, bf16's 2**-8 plus accumulation.
    for emu, ref in zip(*results, strict=True):
        assert torch.isfinite(emu).all()
        torch.testing.assert_close(emu, ref, rtol=0, atol=0.02 * ref.abs().max().item())
    if "attn_mask" in kwargs and kwargs["attn_mask"].dtype == torch.bool:
        assert (results[0][0][:, :, 2] == 0).all()


def test_emulated_attention_dropout_backward():
    # The dropout mask is drawn from torch's RNG; replaying the seed rebuilds it for an
    # autograd reference of dropout(softmax(s)) @ v.
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 8, 16, requires_grad=True) for _ in range(3))
    upstream = torch.randn(1, 2, 8, 16)
    torch.manual_seed(1)
    with EmulatedAutocast(BF16):
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    grads = torch.autograd.grad(out, (q, k, v), upstream)
    torch.manual_seed(1)
    keep = torch.empty(1, 2, 8, 8).bernoulli_(0.6) / 0.6
    ref = torch.softmax(q @ k.transpose(-2, -1) / 4.0, dim=-1) * keep @ v
    ref_grads = torch.autograd.grad(ref, (q, k, v), upstream)
    for emu, r in zip((out, *grads), (ref, *ref_grads), strict=True):
        torch.testing.assert_close(emu, r, rtol=0, atol=0.02 * r.abs().max().item())


# ----------------------------------------------------------------------------------------
# fp16 without loss scaling fails like real fp16


def _tiny_net(first_weight: float | None = None):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    if first_weight is not None:
        nn.init.constant_(net[0].weight, first_weight)
    return net


def _fp16_step(net, prec, x, loss_fn):
    """One trainer-style step; returns (grads after unscaling, grad norm)."""
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, fused=True)
    with prec.autocast():
        loss = loss_fn(net(x).float())
    if prec.scaler is not None:
        prec.scaler.scale(loss).backward()
        prec.scaler.unscale_(opt)
    else:
        loss.backward()
    grads = [p.grad.clone() for p in net.parameters()]
    norm = nn.utils.clip_grad_norm_(net.parameters(), 1.0)
    if prec.scaler is not None:
        prec.scaler.step(opt)
        prec.scaler.update()
    else:
        opt.step()
    return grads, norm


@pytest.mark.parametrize("where", ["activation", "gradient"])
def test_fp16_overflow_without_scaling(where):
    if where == "activation":
        # Inputs and weights are fine in fp16, but 8 * 1000 * 10 = 80000 > 65504 is not.
        x, w = torch.full((8, 8), 1000.0), 10.0

        def loss_fn(out):
            return out.pow(2).mean()
    else:
        x, w = torch.randn(8, 8), None

        def loss_fn(out):
            return out.sum() * 1e5  # d loss / d out = 1e5 > 65504 in the backward

    _, norm = _fp16_step(_tiny_net(w), _prec("fp32"), x, loss_fn)
    assert math.isfinite(norm.item())
    for impl in ("emulated", "real"):
        net = _tiny_net(w)
        _, norm = _fp16_step(net, _prec("fp16_noscale", impl), x, loss_fn)
        assert not math.isfinite(norm.item()), impl
        assert not all(torch.isfinite(p).all() for p in net.parameters()), impl  # corrupted
    # With a GradScaler the overflowing step is skipped and the scale backs off instead.
    net = _tiny_net(w)
    before = copy.deepcopy(net.state_dict())
    prec = _prec("fp16", "emulated")
    _fp16_step(net, prec, x, loss_fn)
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert loss_scale_tensor(prec.scaler).item() == 2.0**15


def test_fp16_underflow_without_scaling_and_recovery_with_it():
    torch.manual_seed(1)
    x, y = torch.randn(8, 8), torch.randint(0, 4, (8,))

    def loss_fn(out):
        return F.cross_entropy(out, y) * 1e-8  # gradients ~1e-9, below fp16's 2**-25

    g32, _ = _fp16_step(_tiny_net(), _prec("fp32"), x, loss_fn)
    assert all((g != 0).any() and g.abs().max() < 1e-8 for g in g32)
    for impl in ("emulated", "real"):
        g16, _ = _fp16_step(_tiny_net(), _prec("fp16_noscale", impl), x, loss_fn)
        assert all((g == 0).all() for g in g16), impl  # flushed to zero
    scaled = {}
    for impl in ("emulated", "real"):
        scaled[impl], _ = _fp16_step(_tiny_net(), _prec("fp16", impl), x, loss_fn)
        for g, ref in zip(scaled[impl], g32, strict=True):
            # x 2**16 brings them to ~1e-4, fp16's normal range: fp16-sized relative error.
            assert (g - ref).norm() < 1e-2 * ref.norm()
    for a, b in zip(scaled["emulated"], scaled["real"], strict=True):
        assert (a - b).norm() < 2e-3 * b.norm()  # bit-identical here


# ----------------------------------------------------------------------------------------
# bf16 on gpt-tiny


def test_emulated_bf16_tracks_real_bf16_on_gpt_tiny():
    """Both bf16 implementations against fp32, at init and over 5 AdamW steps.

    Tolerances (measured over seeds 0-5 at batch 4 x seq 32): the mean |logit| difference
    emulated-vs-real is 0.51-0.58x the fp32-vs-real one (a no-op emulation gives 1.0, rounding
    only the final logits 0.94; bound 0.8): linear layers match bit for bit, but attention's
    one-ulp differences (a different exp) then flip roundings downstream. Losses agree to ~1e-4
    relative, the size of bf16 noise averaged over 128 tokens; 1e-3 leaves room and is still
    4x below bf16's 2**-8 resolution.
    """
    torch.manual_seed(0)
    base = GPT(c.load(None, []).model)
    idx = torch.randint(0, 256, (4, 33))
    x, y = idx[:, :-1], idx[:, 1:]
    modes = {"fp32": _prec("fp32"), "emu": _prec("bf16"), "real": _prec("bf16", "real")}

    with torch.no_grad():
        logits = {}
        for name, p in modes.items():
            with p.autocast():
                logits[name] = base(x)[0].float()
    emu, real, fp32 = logits["emu"], logits["real"], logits["fp32"]
    assert torch.equal(emu, _r(emu, BF16))
    assert (emu - fp32).abs().mean() > 1e-3 * fp32.abs().mean()
    assert (emu - real).abs().mean() < 0.8 * (fp32 - real).abs().mean()

    losses = {}
    for name, p in modes.items():
        model = copy.deepcopy(base)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, fused=True)
        losses[name] = []
        for step in range(5):
            with p.autocast():
                _, loss = model(x, y)
            loss.backward()
            if step == 0 and name != "fp32":
                # Linear weights get half-precision grads (then fp32), as under autocast.
                for mod in model.modules():
                    if isinstance(mod, nn.Linear):
                        assert torch.equal(mod.weight.grad, _r(mod.weight.grad, BF16)), name
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses[name].append(loss.item())
    for le, lr_ in zip(losses["emu"], losses["real"], strict=True):
        assert abs(le - lr_) < 1e-3 * lr_
    assert losses["emu"] != losses["fp32"]
    assert losses["emu"][-1] < losses["emu"][0] - 0.5  # it trains
