"""gpt-125m, the preset the GPU suite (benchmarks/suites/gpu.toml) trains, trained on the
CPU for 2 steps: built, forward, backward, optimizer step, checkpoint, and a resume that
repeats the second step bit for bit. Small batches (2 x 32 tokens) keep it under 4 GB;
its time goes to three forward-backward steps, two 1.5 GB checkpoints and initialising
124M weights twice. The suite's 32 x 256 needs a GPU. And the memory
estimate ``--dry-run`` prints, against what the built-in GPT keeps for its backward."""

import json

import pytest
import torch

from spikebench import config as c
from spikebench import metrics as M
from spikebench.cli import main
from spikebench.model import build_model
from spikebench.train import checkpoint
from spikebench.train.loop import train
from spikebench.train.setup import memory_estimate

G125 = ["model.preset=gpt-125m", "data.batch_size=2", "data.seq_len=32",
        "data.max_bytes=200000", "train.steps=2", "train.log_every=1", "train.eval_every=2",
        "train.eval_batches=1", "train.probe_every=1000", "train.checkpoint_every=1",
        "train.keep_checkpoints=1", "train.progress=false", "train.threads=2",
        "train.compile=false", "optim.lr=6e-4"]


class _CrashAt:
    """Stops the run at ``step``'s read-back, keeping that step's logged values."""

    def __init__(self, step):
        self.step, self.seen = step, None

    def start(self, run):
        pass

    def write(self, metrics):
        if metrics.get(M.STEP) == self.step:
            self.seen = dict(metrics)
            raise RuntimeError("crash")

    def close(self, summary=None):
        pass


def test_gpt125m_trains_checkpoints_and_resumes_two_steps_on_the_cpu(tmp_path):
    cfg = c.load(None, [*G125, f"run.out_dir={tmp_path}", "run.name=r"])
    crash = _CrashAt(2)
    with pytest.raises(RuntimeError, match="crash"):
        train(cfg, sinks=[crash])
    run = tmp_path / "r"
    meta = json.loads((run / "meta.json").read_text())
    assert 124_000_000 < meta["n_params"] < 125_000_000  # GPT-2 small, vocabulary 50304
    (saved,) = checkpoint.saved(run)
    assert saved.name == "step-00000001.pt"
    summary = train(c.load(None, [*G125, f"run.out_dir={tmp_path}", "run.name=r"]),
                    run_dir=run, resume=True)
    assert summary["status"] == "completed" and summary["steps"] == 2
    rows = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    assert [r[M.STEP] for r in rows] == [0, 1, 2]
    step2 = rows[-1]
    # The resumed step 2 is the one the first start trained: the checkpoint held it all.
    for key in (M.TRAIN_LOSS, M.GRAD_NORM, M.VAL_LOSS):
        assert step2[key] == crash.seen[key], key
    assert 10.0 < rows[1][M.TRAIN_LOSS] < 11.5  # ln(50304) = 10.8 at init
    assert [p.name for p in checkpoint.saved(run)] == ["step-00000002.pt"]


def test_dry_run_prints_the_memory_a_gpt125m_step_takes(capsys):
    # A batch small enough that no CI machine refuses it (the suite's 32 x 256: 12.6 GB).
    sets = ["model.preset=gpt-125m", "data.batch_size=4", "data.seq_len=256",
            "train.device=cpu"]
    assert main(["train", "--dry-run", *[a for s in sets for a in ("--set", s)]]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["model"]["n_layer"] == 12  # stdout stays the config's JSON
    line = err.strip()
    assert "\n" not in line and line.startswith(
        "spikebench train: memory per step (estimate, per rank): 3.7 GB for 124.4M parameters "
        "and micro-batches of 4 x 256 tokens, fp32 activations (weights, gradients and AdamW "
        "2.0 GB, a probe step's copy of the weights 497.5 MB, batches 81.9 KB, activations "
        "641.7 MB, logits and loss 618.1 MB); this machine has ")


@pytest.mark.parametrize("mode", ["fp32", "bf16"])
def test_the_estimate_counts_what_the_backward_keeps(mode):
    """Per layer and token the built-in GPT keeps 68 x n_embd bytes for its backward in
    fp32 and 38 x under real bf16 autocast (counted here by a saved-tensors hook, two
    depths apart so embeddings and the output layer cancel)."""
    def kept(n_layer):
        cfg = c.load(None, [f"model.n_layer={n_layer}", "model.n_embd=128", "model.n_head=4",
                            "data.seq_len=64", "data.batch_size=4", f"precision.mode={mode}",
                            "precision.impl=real"])
        model = build_model(cfg.model)
        x = torch.randint(0, 256, (4, 64))
        storages = {}

        def pack(t):
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with torch.autocast("cpu", torch.bfloat16, enabled=mode == "bf16"):
                model(x, x)
        weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
        # Autocast's half copies of the weights are per parameter, not per token.
        copies = 2 * sum(p.numel() for p in model.parameters() if p.dim() == 2) \
            if mode == "bf16" else 0
        n = sum(p.numel() for p in model.parameters())
        est = memory_estimate(cfg, n, torch.device("cuda" if mode == "bf16" else "cpu"))
        return sum(v for k, v in storages.items() if k not in weights) - copies, est

    (two, est2), (four, est4) = kept(2), kept(4)
    per_layer = (four - two) / 2
    estimated = (est4["activations"] - est2["activations"]) / 2
    assert abs(per_layer - estimated) / estimated < 0.1, (per_layer, estimated)
