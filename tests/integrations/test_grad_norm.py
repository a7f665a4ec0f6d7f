"""``grad_norm`` gives ``torch.nn.utils.get_total_norm``'s value bit for bit: its fast lane
(one ``_foreach_norm`` without the grouping) and the mixed-dtype fallback alike."""

from __future__ import annotations

import torch

from spikebench.integrations.loop import grad_norm


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    m = torch.nn.Sequential(torch.nn.Embedding(50, 16), layer, torch.nn.Linear(16, 50))
    x = torch.randint(0, 50, (4, 12))
    torch.nn.functional.cross_entropy(m(x).reshape(-1, 50), x.reshape(-1)).backward()
    return m


def test_grad_norm_is_get_total_norm_bit_for_bit():
    for seed in range(4):
        params = list(_model(seed).parameters())
        want = torch.nn.utils.get_total_norm([p.grad for p in params])
        assert torch.equal(grad_norm(params), want)
        assert torch.equal(grad_norm(_model(seed).parameters()), want)  # a generator too


def test_grad_norm_of_mixed_dtypes_and_missing_grads_is_get_total_norm():
    m = _model(0)
    extra = torch.nn.Linear(3, 3).double()
    extra(torch.ones(3, dtype=torch.float64)).sum().backward()
    unused = torch.nn.Parameter(torch.ones(2))  # no gradient: left out
    params = [*m.parameters(), unused, *extra.parameters()]
    want = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
    assert torch.equal(grad_norm(params), want)
    assert grad_norm([unused]) is None
