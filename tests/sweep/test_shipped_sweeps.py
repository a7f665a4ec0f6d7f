"""Every sweep file the repository ships loads and plans (``--dry-run``), every one a
Makefile target runs exists, and the scale sweeps keep what issue 48 asks of them: three
or more sizes spanning 30x in parameters, every arm at each, five or more seeds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from spikebench import config as cfgmod
from spikebench.cli import main
from spikebench.model import GPT
from spikebench.sweep.spec import load_sweep

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "sweeps").glob("*.toml"))


def test_the_makefile_runs_only_sweep_files_that_exist():
    named = set(re.findall(r"sweeps/[\w.-]+\.toml", (ROOT / "Makefile").read_text()))
    assert named and all((ROOT / n).is_file() for n in named), named
    assert "sweeps/scale-stress.toml" in named


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_a_shipped_sweep_file_plans(path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["sweep", str(path.relative_to(ROOT)), "--dry-run"]) == 0
    assert "training runs" in capsys.readouterr().out


def _params(preset: str) -> int:
    cfg = cfgmod.resolve({"model": {"preset": preset}})
    with torch.device("meta"):
        return sum(p.numel() for p in GPT(cfg.model).parameters())


@pytest.mark.parametrize(("name", "span"), [("scale.toml", 30), ("scale-stress.toml", 30),
                                            ("scale-gpu.toml", 5)])
def test_a_scale_sweep_runs_every_arm_at_three_sizes(name, span):
    """The CPU sweeps span 30x (issue 48); the GPU one, 124M to 774M, about 6x."""
    spec = load_sweep(ROOT / "sweeps" / name)
    sizes = spec.grid["model.preset"]
    assert len(sizes) >= 3 and len(spec.seeds) >= 5
    params = [_params(p) for p in sizes]
    assert params == sorted(set(params)) and params[-1] / params[0] >= span
    plain = [a for a in spec.arms if " @ " not in a]
    assert len(plain) >= 6 and len(spec.arms) == len(plain) * len(sizes)
