import json
import math

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from spikebench import config as c
from spikebench.cli import main
from spikebench.train.loop import train

torch.set_num_threads(1)

# Small and quick: 1 layer, 32 wide, seq 32, batch 8, 1 MB of the stdlib.
FAST = [
    "model.n_layer=1", "model.n_embd=32", "model.n_head=2", "data.seq_len=32",
    "data.batch_size=8", "data.max_bytes=200000", "train.steps=30", "train.eval_every=10",
    "train.eval_batches=2", "train.log_every=5", "train.probe_every=10",
    "train.progress=false",
]


def run(tmp_path, *over, name="r"):
    cfg = c.load(None, [*FAST, f"run.out_dir={tmp_path}", f"run.name={name}", *over])
    summary = train(cfg)
    rows = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").open()]
    return summary, rows


def test_run_folder_contents(tmp_path):
    summary, rows = run(tmp_path)
    d = tmp_path / "r"
    assert sorted(p.name for p in d.iterdir()) == [
        "config.json", "meta.json", "metrics.jsonl", "summary.json"]
    assert json.loads((d / "config.json").read_text())["train"]["steps"] == 30
    meta = json.loads((d / "meta.json").read_text())
    assert len(meta["corpus"]["sha256"]) == 64
    assert meta["environment"]["torch"] == torch.__version__
    assert summary["status"] == "completed" and summary["steps"] == 30
    assert summary["final_val_loss"] < summary["initial_val_loss"]
    steps = [r for r in rows if "train/loss" in r]
    assert [r["step"] for r in steps] == list(range(1, 31))
    for key in ("optim/grad_norm", "optim/lr", "perf/tokens_per_s", "data/tokens"):
        assert key in steps[0]
    assert [r["step"] for r in rows if "val/loss" in r] == [0, 10, 20, 30]
    probes = [r for r in rows if "probe/update_ratio" in r]
    assert [r["step"] for r in probes] == [10, 20, 30]
    assert "probe/attn_logit_max/0" in probes[0] and "probe/log_z" in probes[0]
    assert steps[-1]["data/tokens"] == 30 * 8 * 32


def test_same_seed_bit_identical(tmp_path):
    _, a = run(tmp_path, name="a")
    _, b = run(tmp_path, name="b")
    _, other = run(tmp_path, "train.seed=1", name="c")
    la = [r["train/loss"] for r in a if "train/loss" in r]
    lb = [r["train/loss"] for r in b if "train/loss" in r]
    lc = [r["train/loss"] for r in other if "train/loss" in r]
    assert la == lb
    assert la != lc


def test_probes_ride_on_the_training_step_and_leave_training_unchanged(tmp_path):
    """A probe step's forward records the precursors beside itself: the same losses and
    grad norms bit for bit as a run that never probes, in fp32 and emulated bf16."""
    for mode in ("fp32", "bf16"):
        over = (f"precision.mode={mode}", "precision.impl=emulated") if mode != "fp32" else ()
        _, probed = run(tmp_path, *over, "train.probe_every=3", name=f"p-{mode}")
        _, plain = run(tmp_path, *over, "train.probe_every=100000", name=f"n-{mode}")
        for key in ("train/loss", "optim/grad_norm"):
            assert [r[key] for r in probed if key in r] == [r[key] for r in plain if key in r]
        logits = [r["probe/attn_logit_max/0"] for r in probed if "probe/attn_logit_max/0" in r]
        assert len(logits) == 10 and all(math.isfinite(v) and v != 0 for v in logits)
        assert len({r.get("probe/log_z") for r in probed if "probe/log_z" in r}) > 1


class StepSpy:
    """Sees every optimizer step inside train(), before it is taken: the post-clip global
    grad norm and the LR each group will apply (a global pre-step hook, no mock)."""

    def __enter__(self):
        self.norms, self.lrs = [], []
        self._handle = register_optimizer_step_pre_hook(self._hook)
        return self

    def _hook(self, opt, args, kwargs):
        grads = [p.grad for g in opt.param_groups for p in g["params"] if p.grad is not None]
        self.norms.append(torch.stack([g.norm() for g in grads]).norm().item())
        self.lrs.append([g["lr"] for g in opt.param_groups])

    def __exit__(self, *exc):
        self._handle.remove()


def losses(rows, key="train/loss"):
    return [r[key] for r in rows if key in r]


def test_clipping_bounds_the_applied_gradient_and_logs_the_preclip_norm(tmp_path):
    with StepSpy() as spy:
        _, rows = run(tmp_path, "optim.clip=0.05", "optim.lr=1e-2", name="clip")
    assert len(spy.norms) == 30 and max(spy.norms) <= 0.05 * (1 + 1e-4)
    logged = losses(rows, "optim/grad_norm")
    assert min(logged) > 0.05  # the log keeps the pre-clip norm
    with StepSpy() as off:
        _, free = run(tmp_path, "optim.lr=1e-2", name="free")
    assert max(off.norms) > 0.05 and off.norms[0] == pytest.approx(logged[0], rel=1e-5)
    # Clipping at a tiny threshold changes the trajectory.
    assert losses(rows)[5:] != pytest.approx(losses(free)[5:], rel=1e-3)


def test_clip_grad_norm_bounds_norm():
    # The primitive the loop relies on: after clipping, the global norm is at most the threshold.
    p = torch.nn.Parameter(torch.ones(10))
    p.grad = torch.full((10,), 3.0)
    pre = torch.nn.utils.clip_grad_norm_([p], 1.0, foreach=True)
    assert pre.item() == pytest.approx(math.sqrt(90))
    assert p.grad.norm().item() == pytest.approx(1.0, rel=1e-4)


def test_applied_lr_is_the_logged_lr_under_warmup_decay_and_shock(tmp_path):
    from spikebench.train.schedule import lr_factor

    over = ["optim.lr=1e-3", "schedule.warmup_ratio=0.2", "faults.lr_shock_at=0.5",
            "faults.lr_shock_factor=10", "faults.lr_shock_steps=4"]
    with StepSpy() as spy:
        _, rows = run(tmp_path, *over)
    logged = losses(rows, "optim/lr")
    assert len(spy.lrs) == len(logged) == 30
    for lrs, lr in zip(spy.lrs, logged, strict=True):
        assert lrs == [lr, lr]  # both parameter groups, exactly the logged value
    cfg = c.load(None, [*FAST, *over])
    expect = [1e-3 * lr_factor(i, 30, cfg.schedule) * (10 if 15 <= i < 19 else 1)
              for i in range(30)]
    assert logged == pytest.approx(expect, rel=1e-12)
    assert logged[15] == pytest.approx(10 * 1e-3 * lr_factor(15, 30, cfg.schedule))


def test_warmup_schedule_in_log(tmp_path):
    _, rows = run(tmp_path, "schedule.warmup_ratio=0.1", "optim.lr=1e-3")
    lrs = [r["optim/lr"] for r in rows if "optim/lr" in r]
    assert lrs[:3] == pytest.approx([1e-3 / 3, 2e-3 / 3, 1e-3])
    assert lrs[-1] == pytest.approx(1e-4)


@pytest.mark.parametrize("mode", ["fp32", "bf16", "fp16", "fp16_noscale"])
def test_each_precision_runs(tmp_path, mode):
    summary, rows = run(tmp_path, f"precision.mode={mode}", "train.steps=10")
    assert summary["status"] == "completed"
    # auto: whichever this CPU runs faster, named in the label, and why in the meta.
    meta = json.loads((tmp_path / "r" / "meta.json").read_text())
    assert meta["precision"] == summary["precision"]
    if mode != "fp32":
        impl = meta["precision_impl"]
        assert summary["precision"].endswith({"emulated": "(emulated)",
                                              "real": "(real autocast)"}[impl])
        assert meta["precision_choice"].startswith(("native", "no native"))
    # Every mode logs a loss scale; only fp16 with scaling moves it off 1.
    assert rows[1]["optim/loss_scale"] == (2.0**16 if mode == "fp16" else 1.0)


def test_real_autocast_selectable(tmp_path):
    summary, _ = run(tmp_path, "precision.mode=bf16", "precision.impl=real", "train.steps=3",
                     "train.eval_every=3")
    assert summary["status"] == "completed" and "real" in summary["precision"]


def test_grad_accum_matches_full_batch(tmp_path):
    # Same windows, split in micro-batches: the same step up to float rounding, losses and
    # the gradient (its norm) alike.
    _, a = run(tmp_path, "train.steps=5", name="a")
    _, b = run(tmp_path, "train.steps=5", "optim.grad_accum=2", name="b")
    assert losses(b) == pytest.approx(losses(a), rel=1e-4)
    na, nb = losses(a, "optim/grad_norm"), losses(b, "optim/grad_norm")
    assert nb == pytest.approx(na, rel=1e-3)


def test_emulated_half_precision_in_the_real_loop(tmp_path):
    # Inside train(), bf16 rounds every linear layer's output to bf16 and the run differs
    # from fp32 by more than rounding noise (fp32 is bit-reproducible) but stays a sane run.
    seen = {"fp32": [], "bf16": []}

    def hook(module, args, output):
        if isinstance(module, torch.nn.Linear):
            seen[current[0]].append(bool((output == output.bfloat16().float()).all()))

    current = ["fp32"]
    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        # Probes off: they are a separate fp32 forward.
        _, fp32 = run(tmp_path, "train.steps=10", "train.probe_every=100", name="fp32")
        current[0] = "bf16"
        _, bf16 = run(tmp_path, "train.steps=10", "train.probe_every=100",
                      "precision.mode=bf16", "precision.impl=emulated", name="bf16")
    finally:
        handle.remove()
    assert seen["bf16"] and all(seen["bf16"])
    assert not any(seen["fp32"])
    a, b = losses(fp32), losses(bf16)
    gap = max(abs(x - y) / x for x, y in zip(a, b, strict=True))
    assert 1e-5 < gap < 0.05


def test_huge_lr_diverges_cleanly(tmp_path):
    summary, rows = run(tmp_path, "optim.lr=1e6", "train.steps=200", "train.eval_every=100")
    assert summary["status"] == "diverged"
    step = summary["diverged_step"]
    assert 1 <= step < 200 and summary["steps"] == step
    # Nothing after the bad step is logged, and the loss before it was finite.
    logged = [r["step"] for r in rows if "train/loss" in r]
    assert max(logged) == step
    bad = [r for r in rows if r.get("step") == step and "train/loss" in r][0]
    assert not (math.isfinite(bad["train/loss"]) and math.isfinite(bad["optim/grad_norm"]))
    # Tokens stop at the bad step, not at the end of its log interval.
    assert summary["tokens"] == bad["data/tokens"] and "time/elapsed_s" in bad


def test_curriculum_seqlen_in_log(tmp_path):
    _, rows = run(tmp_path, "curriculum.kind=seqlen", "curriculum.seqlen_start=8",
                  "curriculum.ratio=0.5")
    lens = [r["data/seq_len"] for r in rows if "data/seq_len" in r]
    assert lens[0] == 8 and lens[-1] == 32
    assert lens == sorted(lens)


def test_fault_burst_recorded(tmp_path):
    _, rows = run(tmp_path, "faults.burst=random_bytes", "faults.at=0.5", "faults.length=5",
                  "faults.lr_shock_at=0.2", "faults.lr_shock_factor=1.0")
    loss = {r["step"]: r["train/loss"] for r in rows if "train/loss" in r}
    # Random bytes cost ~ln(256) = 5.5 nats to a model that has learnt some byte statistics.
    assert min(loss[s] for s in range(16, 21)) > loss[15] + 0.5
    assert loss[21] < loss[16]
    meta = json.loads((tmp_path / "r" / "meta.json").read_text())
    steps = {i["kind"]: (i["first_step"], i["last_step"]) for i in meta["injections"]}
    assert steps == {"random_bytes": (16, 20), "lr_shock": (7, 16)}


@pytest.mark.parametrize(
    "over, fragment",
    [
        (["optim.clip=-1"], "optim.clip = -1.0"),
        (["schedule.warmup_ratio=2"], "schedule.warmup_ratio = 2.0"),
        (["precision.mode=fp4"], "precision.mode = 'fp4'"),
        (["data.seq_len=1000"], "data.seq_len = 1000"),
        (["data.corpus=/nonexistent/x.txt"], "data.corpus"),
        (["model.cls=no.such:Model"], "model.cls"),
        (["train.device=cuda:0"] if not torch.cuda.is_available() else ["train.device=tpu"],
         "train.device"),
    ],
)
def test_cli_invalid_config_one_line_no_run_folder(tmp_path, capsys, over, fragment):
    sets = [a for o in [*FAST, f"run.out_dir={tmp_path}/out", *over] for a in ("--set", o)]
    assert main(["train", *sets]) == 2
    err = capsys.readouterr().err.strip()
    assert fragment in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_cli_dry_run_prints_config(capsys):
    assert main(["train", "--set", "optim.lr=0.01", "--dry-run"]) == 0
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["optim"]["lr"] == 0.01 and cfg["model"]["preset"] == "gpt-tiny"


def test_offline_analysis_of_own_log_matches_online_monitor(tmp_path):
    from spikebench.runs.text import read_log
    from spikebench.scoring.run import score_log

    summary, _ = run(tmp_path, "faults.burst=random_bytes", "faults.at=0.5",
                     "faults.length=5", "train.steps=40")
    online = [(e["onset"], e["peak"], e["metric"], e["recovery_steps"], e["area"])
              for e in summary["spikes"]["events"]]
    offline = score_log(read_log(tmp_path / "r" / "metrics.jsonl"))
    names = {"loss": "train/loss", "grad_norm": "optim/grad_norm"}
    got = [(e["onset"], e["peak"], names[e["metric"]], e["recovery_steps"], e["area"])
           for e in offline["events"]]
    assert online and got == online
    assert any(e["injected"] for e in summary["spikes"]["events"])


def test_fp16_overflow_steps_are_skipped_and_counted_not_fatal(tmp_path):
    # A loss scale of 2**40 makes the (emulated) fp16 gradients overflow at first: the scaler
    # skips those steps and halves the scale until they fit.
    summary, rows = run(tmp_path, "precision.mode=fp16", "precision.init_scale=1099511627776",
                        "train.steps=30")
    assert summary["status"] == "completed"
    assert summary["skipped_steps"] >= 5
    scales = [r["optim/loss_scale"] for r in rows if "optim/loss_scale" in r]
    assert scales[0] == 2.0**39  # halved after the first step overflowed
    assert min(scales) <= 2.0**35
    assert rows[-1]["optim/skipped_steps"] == summary["skipped_steps"]
    assert summary["final_val_loss"] < summary["initial_val_loss"]


def test_default_detector_on_the_default_scenario(tmp_path):
    # gpt-tiny as `make sweep` trains it (LR 1e-2, 300 steps, 1 thread): a clean run has no
    # loss-spike event; the default 20-step burst of random bytes (steps 151-170) has one,
    # at its first step, counted as the fault's, not as a spontaneous spike. Grad-norm
    # events are precursors and not counted.
    over = ["optim.lr=1e-2", "train.steps=300", "train.eval_every=25", "train.threads=1",
            "train.progress=false", f"run.out_dir={tmp_path}"]
    clean = train(c.load(None, [*over, "run.name=clean"]))["spikes"]
    burst = train(c.load(None, [*over, "run.name=burst", "faults.burst=random_bytes",
                                "faults.at=0.5", "faults.length=20"]))["spikes"]
    assert (clean["n_events"], clean["n_injected_events"]) == (0, 0)
    assert (burst["n_events"], burst["n_injected_events"]) == (0, 1)
    (event,) = [e for e in burst["events"] if e["metric"] == "train/loss"]
    assert event["onset"] == 151 and event["injected"]
