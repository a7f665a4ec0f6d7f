"""Tiny sweep files for the sweep tests: gpt-tiny cut down to seconds per trial."""

from pathlib import Path

TINY_CONFIG = """
[config]
model.n_layer = 1
model.n_embd = 32
model.n_head = 2
data.seq_len = 32
data.batch_size = 4
data.max_bytes = 200000
train.steps = {steps}
train.eval_every = 6
train.eval_batches = 1
train.log_every = 6
train.probe_every = 6
optim.lr = 1e-2
"""


def write_sweep(tmp_path: Path, *, name="tiny", trials=2, seeds="[0]", steps=12,
                objective="multi", extra_study="", space=None, comparison=None) -> Path:
    space = space if space is not None else (
        '"schedule.warmup_ratio" = { low = 0.0, high = 0.1 }\n'
        '"optim.clip" = { low = 0.1, high = 10.0, log = true, off = true }\n')
    comparison = comparison if comparison is not None else (
        'baseline = { "optim.clip" = "off" }\n'
        '[comparison.arms]\n"clip 1.0" = { "optim.clip" = 1.0 }\n')
    text = (f'[study]\nname = "{name}"\nobjective = "{objective}"\ntarget_loss = 3.3\n'
            f"seeds = {seeds}\ntrials = {trials}\n{extra_study}\n"
            + TINY_CONFIG.format(steps=steps) + "\n[space]\n" + space
            + ("\n[comparison]\n" + comparison if comparison else ""))
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path
