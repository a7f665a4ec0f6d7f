"""The code in docs/responses.md, "In your own loop", runs: every Python block parses, and
the plain-loop ones run as shown on a tiny model (the names they assume defined here)."""

import re
from pathlib import Path

import torch

torch.set_num_threads(1)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "responses.md"


def blocks():
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## In your own loop", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_every_block_parses_and_the_plain_loop_ones_run():
    found = blocks()
    assert len(found) == 4
    for code in found:
        compile(code, str(PAGE), "exec")
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    data = [(torch.randn(16, 8), torch.randn(16, 1)) for _ in range(30)]
    loss_fn = torch.nn.functional.mse_loss
    ns = {"model": model, "loader": data, "loss_fn": loss_fn, "steps": 30,
          "batch": lambda i: data[i % len(data)]}
    skip, hf, zclip, rollback = found
    assert "Trainer(" in hf
    exec(skip, ns)
    assert int(ns["opt"].skipped) >= 0 and ns["opt"].method == "found_inf"
    x, y = data[0]
    loss = loss_fn(model(x), y)
    exec(zclip, {**ns, "loss": loss, "opt": torch.optim.SGD(model.parameters(), lr=0.1)})
    exec(rollback, {**ns, "opt": torch.optim.AdamW(model.parameters())})
