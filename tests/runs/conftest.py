"""Runs written once per test session by the real libraries (runs_writers.py), shared by the
xdist workers through a lock, as pytest-xdist's documentation shows: the HF and Lightning
runs take seconds each."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import runs_writers as W


def _need(module: str) -> None:
    if os.environ.get("CI"):  # CI installs the dev extra: never skip there
        __import__(module)
    else:
        pytest.importorskip(module)


def _shared(tmp_path_factory, worker_id: str, name: str, make) -> Path:
    """``make(folder)`` run once for all workers; the folder it filled."""
    if worker_id == "master":
        folder = tmp_path_factory.mktemp(name)
        make(folder)
        return folder
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp().parent
    folder, done = root / name, root / f"{name}.done"
    with FileLock(str(root / f"{name}.lock")):
        if not done.exists():
            folder.mkdir(exist_ok=True)
            make(folder)
            done.write_text(json.dumps("ok"))
    return folder


@pytest.fixture(scope="session")
def hf_out(tmp_path_factory, worker_id) -> Path:
    """Two HF Trainer runs (run-a, run-b) and their TensorBoard, W&B, MLflow and long-CSV
    files."""
    _need("transformers")
    return _shared(tmp_path_factory, worker_id, "hf", W.hf_all)


@pytest.fixture(scope="session")
def pl_run(tmp_path_factory, worker_id) -> Path:
    """A Lightning CSVLogger version folder."""
    _need("lightning")
    out = _shared(tmp_path_factory, worker_id, "lightning", W.lightning_run)
    return out / "lightning_logs" / "version_0"


@pytest.fixture(scope="session")
def tb_run(tmp_path_factory, worker_id) -> Path:
    """A SummaryWriter run folder with add_hparams."""
    _need("tensorboard")
    return _shared(tmp_path_factory, worker_id, "tb", lambda d: W.tensorboard_run(d / "adamw")
                   ) / "adamw"
