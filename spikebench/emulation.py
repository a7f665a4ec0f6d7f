"""Emulated half precision: fp32 compute, rounded to bf16 or fp16 where autocast would be.

On most CPUs real half matmuls are many times slower than fp32
(``benchmarks/precision_speed.py``), so there the default
(:func:`spikebench.precision.make_precision`) is this emulation:

* matmul-like ops (``F.linear``, ``matmul``/``@``, ``mm``, ``bmm``, ``addmm``, ``addbmm``,
  ``baddbmm``, ``einsum``, ``conv1d/2d/3d``) get inputs rounded to half, compute in fp32 (as
  half kernels accumulate in fp32) and have their output rounded to half;
* ``scaled_dot_product_attention`` is computed the way half flash-attention kernels do:
  half inputs, fp32 scores and softmax statistics, probabilities rounded to half before they
  multiply V, half output, and the matching roundings in backward (:class:`_FlashAttention`);
* every other op (layer norm, softmax, GELU, the loss...) runs in fp32, untouched;
* gradients crossing any of those roundings on the way back are rounded the same way, which
  reproduces autocast's half-precision internal gradients while parameter grads stay fp32;
* a value already rounded (a half op's result, or a view of one) goes into the next half op
  as it is: rounding it again would change nothing but the time.

The rounding is a plain ``t.to(half).to(float32)``, so fp16 overflows to inf above 65504,
rounds to subnormals below 6.1e-5 and flushes to zero below 2**-25, exactly like the format.
``tests/test_precision.py`` compares it with real CPU bf16 autocast op by op.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakIdKeyDictionary

HALF_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp16_noscale": torch.float16}


class _Round(torch.autograd.Function):
    """Rounds through ``dtype`` the value going forward and/or the gradient going back."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, dtype: torch.dtype, fwd: bool, bwd: bool) -> torch.Tensor:
        ctx.dtype, ctx.bwd = dtype, bwd
        return x.to(dtype).to(x.dtype) if fwd else x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        if ctx.bwd:
            grad = grad.to(ctx.dtype).to(grad.dtype)
        return grad, None, None, None


def round_to(
    x: torch.Tensor, dtype: torch.dtype, *, forward: bool = True, backward: bool = True
) -> torch.Tensor:
    """``x`` rounded to ``dtype`` (round-to-nearest-even) but kept fp32; differentiable.

    Gradients flowing back through the result are rounded to ``dtype`` too, so in fp16 a
    gradient above 65504 becomes inf and one below 2**-25 becomes 0. ``forward=False`` rounds
    only the gradient, ``backward=False`` only the value (a straight-through rounding).
    Only fp32 tensors are rounded: integer, bool, fp64 and already-half tensors come back
    unchanged, as autocast leaves them.
    """
    if x.dtype != torch.float32:
        return x
    if forward and backward or not (x.requires_grad and torch.is_grad_enabled()):
        # The two casts are differentiable and their backward casts the gradient the same
        # way, in C++: no Python autograd node. Without a graph no gradient is rounded.
        return x.to(dtype).to(torch.float32) if forward else x
    return _Round.apply(x, dtype, forward, backward)


def _round_(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` rounded through ``dtype`` in place (no graph): one half-size temporary."""
    return t.copy_(t.to(dtype))


class _FlashAttention(torch.autograd.Function):
    """Attention in fp32 with the internal roundings of a half flash-attention kernel.

    Takes q, k, v already rounded to half, an optional additive fp32 ``bias`` (0 or -inf for
    masks) and an optional dropout multiplier ``keep`` (0 or 1/(1-p)). Forward: fp32 scores
    ``q @ k.T * scale + bias``, fp32 row max and sum, ``exp(s - max)`` rounded to half before
    it multiplies v, the sum taken over the unrounded values, half output. Backward (the
    flash-attention-2 recipe): fp32 probabilities, rounded to half for ``dv = p.T @ dout``;
    ``ds = p * (dout @ v.T - rowsum(dout * out))`` rounded to half before ``dq = ds @ k`` and
    ``dk = ds.T @ q``; the incoming gradient is rounded to half too. The kernels recompute
    the probabilities from a saved log-sum-exp; this saves the (T, T) exps instead, trading
    memory for time on CPU.

    CPU ``exp`` takes a slow path on -inf and on results below fp32's normal range. So
    ``s - max`` is clamped at -87 (exp 1.6e-38, where the row sum is at least 1) and the
    masked entries are zeroed after the exp; an unmasked probability under 1.6e-38 is taken
    as 1.6e-38, far below a half ulp of any output.
    """

    @staticmethod
    def forward(ctx, q, k, v, bias, keep, scale, dtype):
        # Autograd is off inside forward/backward, so the (T, T) buffers are updated in place.
        e = torch.matmul(q, k.transpose(-2, -1)).mul_(scale)
        if bias is not None:
            e.add_(bias)
        # A row whose keys are all masked gets max 0 and sum 1, hence output 0, not NaN.
        m = e.amax(dim=-1, keepdim=True)
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        e.sub_(m).clamp_(min=_EXP_FLOOR).exp_()
        if bias is not None:
            e.mul_(torch.isfinite(bias))
        denom = e.sum(dim=-1, keepdim=True)
        denom = torch.where(denom > 0, denom, torch.ones_like(denom))
        p = e.to(dtype).to(torch.float32)
        if keep is not None:
            p.mul_(keep)
        out = _round_(torch.matmul(p, v).div_(denom), dtype)
        ctx.save_for_backward(q, k, v, e, denom, keep, out)
        ctx.scale, ctx.dtype = scale, dtype
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, e, denom, keep, out = ctx.saved_tensors
        dtype = ctx.dtype
        dout = dout.to(dtype).to(torch.float32, memory_format=torch.contiguous_format)
        p = e / denom
        dp = torch.matmul(dout, v.transpose(-2, -1))
        if keep is not None:
            dp.mul_(keep)
        delta = (dout * out).sum(dim=-1, keepdim=True)
        ds = _round_(dp.sub_(delta).mul_(p), dtype)
        p_half = _round_(p, dtype)  # p is this function's own, and ds has been taken
        if keep is not None:
            p_half.mul_(keep)
        dv = torch.matmul(p_half.transpose(-2, -1), dout)
        dq = torch.matmul(ds, k).mul_(ctx.scale)
        dk = torch.matmul(ds.transpose(-2, -1), q).mul_(ctx.scale)
        return dq, dk, dv, None, None, None, None


_EXP_FLOOR = -87.0  # exp(-87) = 1.6e-38 is still a normal fp32


def _emulated_sdpa(
    dtype: torch.dtype,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    is_half=lambda t: False,  # tensors already holding half values
) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` as a half flash-attention kernel rounds it.

    q, k, v and a float mask are rounded to half (and so are their gradients); the rest is
    :class:`_FlashAttention`. With one key block (sequences up to 512 on CPU) the forward
    matches torch's CPU bf16 kernel bit for bit on most outputs, the rest one ulp off (its
    vectorised exp differs). Kernels that tile the keys round ``exp`` against a running block
    max instead of the row max, and torch's CPU backward accumulates dk, dv over query blocks
    of 32 in half: same error size, different bits. Unlike the fused kernels this
    materialises (T, T) scores, fine for CPU-sized models. Masks get no gradient; dropout
    uses torch's RNG, not the kernels' stream. Non-fp32 queries (which autocast would not
    cast either) go to torch's kernel untouched.
    """
    if query.dtype != torch.float32:
        return F.scaled_dot_product_attention(
            query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa
        )
    # Contiguous: the (T, T) matmuls are faster than on the heads' strided views.
    q, k, v = ((t if is_half(t) else round_to(t, dtype)).contiguous() for t in (query, key, value))
    if enable_gqa and k.size(-3) != q.size(-3):
        k = k.repeat_interleave(q.size(-3) // k.size(-3), dim=-3)
        v = v.repeat_interleave(q.size(-3) // v.size(-3), dim=-3)
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    L, S = q.size(-2), k.size(-2)
    bias = None
    if is_causal:
        causal = torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
        bias = torch.zeros(L, S, device=q.device).masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            extra = torch.zeros(attn_mask.shape, device=q.device)
            extra = extra.masked_fill(~attn_mask, float("-inf"))
        else:
            extra = attn_mask.detach().to(dtype).to(torch.float32)
        bias = extra if bias is None else bias + extra
    keep = None
    if dropout_p > 0.0:
        shape = (*q.shape[:-1], S)
        keep = torch.empty(shape, device=q.device).bernoulli_(1.0 - dropout_p) / (1.0 - dropout_p)
    return _FlashAttention.apply(q, k, v, bias, keep, scale, dtype)


# Ops autocast runs in half precision and that a model is likely to call from Python.
# ``x @ y`` arrives as ``Tensor.matmul``; the dunder entries are there in case a build differs.
_HALF_OPS = frozenset(
    {
        F.linear,
        F.scaled_dot_product_attention,
        F.conv1d,
        F.conv2d,
        F.conv3d,
        torch.matmul,
        torch.mm,
        torch.bmm,
        torch.addmm,
        torch.addbmm,
        torch.baddbmm,
        torch.einsum,
        torch.Tensor.matmul,
        torch.Tensor.__matmul__,
        torch.Tensor.__rmatmul__,
        torch.Tensor.mm,
        torch.Tensor.bmm,
        torch.Tensor.addmm,
        torch.Tensor.addbmm,
        torch.Tensor.baddbmm,
    }
)


class EmulatedAutocast(TorchFunctionMode):
    """Context in which matmul-like ops and attention see and produce values rounded to ``dtype``.

    Every fp32 tensor argument of a matmul-like op (activations, weights, biases) is rounded
    on the way in and the fp32 result on the way out; the op itself computes in fp32.
    ``F.scaled_dot_product_attention`` becomes :func:`_emulated_sdpa`, which also rounds the
    attention probabilities and score gradients as half flash kernels do; with
    ``flash_rounding=False`` it is torch's fp32 kernel with rounded inputs and output instead
    (faster, but attention then is more precise than the real thing). All other ops run untouched, as autocast's fp32 ops (layer norm, softmax, losses).

    Edge cases: tensors nested in lists (``einsum(eq, [a, b])``) are rounded too; ops called
    from C++ inside another op (e.g. the bmm inside ``einsum``) are not seen, only the outer
    call; in-place variants (``addmm_``) and ``out=`` arguments are not supported. Outputs
    are fp32 tensors holding half-representable values, not half tensors as under autocast.
    Only calls made while the context is active are affected; the backward pass, run later,
    is rounded where the forward inserted roundings, so it need not run inside the context.
    """

    def __init__(self, dtype: torch.dtype, flash_rounding: bool = True):
        super().__init__()
        self.dtype = dtype
        self.flash_rounding = flash_rounding
        # Results already rounded (and views of them, at the version they were rounded at).
        self._half: WeakIdKeyDictionary = WeakIdKeyDictionary()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        # The mode is popped while its handler runs, so the calls below are not intercepted.
        if func in _VALUE_KEEPING:
            out = func(*args, **kwargs)
            if args and self._is_half(args[0]):
                self._mark(out)
            return out
        if func is F.scaled_dot_product_attention and self.flash_rounding:
            return self._mark(_emulated_sdpa(self.dtype, *args, is_half=self._is_half, **kwargs))
        if func not in _HALF_OPS:
            return func(*args, **kwargs)
        args = tuple(self._round(a) for a in args)
        kwargs = {k: self._round(v) for k, v in kwargs.items()}
        return self._mark(self._round(func(*args, **kwargs)))

    def _round(self, x):
        if isinstance(x, torch.Tensor):
            return x if self._is_half(x) else round_to(x, self.dtype)
        if isinstance(x, list | tuple):
            return type(x)(self._round(v) for v in x)
        return x

    def _is_half(self, x) -> bool:
        if not isinstance(x, torch.Tensor):
            return False
        version = self._half.get(x)
        return version is not None and version == x._version

    def _mark(self, out):
        """Remembers that ``out`` (a tensor, or tensors in a tuple or list) holds half
        values: a later half op takes it as it is. Its gradient is then rounded once, where
        ``out`` was rounded, after the gradients of all its uses are summed (real autocast
        rounds each use's gradient, then sums in half: a difference in the last bit, and
        only for a result with several uses). An in-place change bumps the version."""
        if isinstance(out, torch.Tensor) and out.dtype == torch.float32:
            if not out.is_inference():  # inference tensors keep no version: always rounded
                self._half[out] = out._version
        elif isinstance(out, list | tuple):
            for t in out:
                self._mark(t)
        return out


# Ops whose results hold only values of their first argument: a result of one holds half
# values if that argument did, so a half op after it need not round it again.
_VALUE_KEEPING = frozenset(
    {
        torch.Tensor.view,
        torch.Tensor.view_as,
        torch.Tensor.reshape,
        torch.Tensor.reshape_as,
        torch.reshape,
        torch.Tensor.transpose,
        torch.transpose,
        torch.Tensor.permute,
        torch.permute,
        torch.Tensor.t,
        torch.Tensor.contiguous,
        torch.Tensor.split,
        torch.split,
        torch.Tensor.chunk,
        torch.chunk,
        torch.Tensor.unbind,
        torch.unbind,
        torch.Tensor.__getitem__,
        torch.Tensor.narrow,
        torch.Tensor.flatten,
        torch.flatten,
        torch.Tensor.unflatten,
        torch.Tensor.squeeze,
        torch.Tensor.unsqueeze,
        torch.Tensor.expand,
        torch.Tensor.repeat_interleave,
    }
)
