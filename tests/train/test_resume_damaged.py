"""`--resume` on a damaged run folder: refused in one line before anything runs (a finished
run, a missing or damaged meta.json or config.json), or, as the README promises, a damaged
checkpoint or log named in one line and skipped (the previous checkpoint, else step 0)."""

import hashlib
import io
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fuzzkit import refused  # noqa: E402

from spikebench.cli import main  # noqa: E402
from spikebench.train import checkpoint  # noqa: E402

TINY = ["model.n_layer=1", "model.n_embd=32", "model.n_head=2", "data.seq_len=32",
        "data.batch_size=4", "data.max_bytes=200000", "train.eval_every=4",
        "train.eval_batches=1", "train.log_every=2", "train.threads=1", "train.progress=false",
        "train.checkpoint_every=2", "train.keep_checkpoints=3", "train.steps=6"]


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """A run with checkpoints at steps 2, 4 and 6 and no summary, as if killed after its
    last checkpoint (the log renamed back to its .partial)."""
    tmp = tmp_path_factory.mktemp("killed")
    argv = ["train", *[a for s in [*TINY, f"run.out_dir={tmp}", "run.name=run"]
                       for a in ("--set", s)]]
    assert main(argv) == 0
    run = tmp / "run"
    (run / "summary.json").unlink()
    (run / "metrics.jsonl").rename(run / "metrics.jsonl.partial")
    return run


def _copy(killed: Path, tmp_path: Path) -> Path:
    sandbox = tmp_path / "sb"
    shutil.copytree(killed, sandbox / "run")
    return sandbox


DAMAGE = {
    "meta.json missing": (lambda r: (r / "meta.json").unlink(), "meta.json is missing"),
    "meta.json truncated": (lambda r: (r / "meta.json").write_bytes(
        (r / "meta.json").read_bytes()[:40]), "meta.json is damaged"),
    "meta.json a list": (lambda r: (r / "meta.json").write_text("[1, 2]"),
                         "meta.json holds a JSON list"),
    "meta.json not UTF-8": (lambda r: (r / "meta.json").write_bytes(b"{\"a\": \"\xff\xfe\"}"),
                            "meta.json is damaged"),
    "meta.json nested": (lambda r: (r / "meta.json").write_text("[" * 100_000),
                         "meta.json is"),
    "meta.json a folder": (lambda r: ((r / "meta.json").unlink(), (r / "meta.json").mkdir()),
                           "meta.json is not a regular file"),
    "config.json truncated": (lambda r: (r / "config.json").write_bytes(
        (r / "config.json").read_bytes()[:50]), "not a valid JSON config"),
    "config.json nested": (lambda r: (r / "config.json").write_text(
        '{"a": ' + "[" * 100 + "]" * 100 + "}"), "nested more than 32 levels"),
    "config.json too deep for json": (lambda r: (r / "config.json").write_text("[" * 100_000),
                                      "nested more than 32 levels"),
    "finished": (lambda r: (r / "summary.json").write_text("{}"), "the run already finished"),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_run_folder_that_cannot_be_resumed_is_refused_unchanged(killed, tmp_path, capsys,
                                                                  case):
    sandbox = _copy(killed, tmp_path)
    damage, expect = DAMAGE[case]
    damage(sandbox / "run")
    refused(["train", "--resume", "run"], sandbox, capsys, expect=expect)


def _replace_checkpoint(run: Path, step: int, obj) -> Path:
    """Write ``obj`` as the checkpoint of ``step`` with a matching checksum."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    path = checkpoint.folder(run) / f"step-{step:08d}.pt"
    path.write_bytes(buf.getvalue())
    path.with_suffix(".sha256").write_text(hashlib.sha256(buf.getvalue()).hexdigest() + "\n")
    return path


def _resume(run: Path, capsys) -> list[str]:
    assert main(["train", "--resume", str(run)]) == 0
    return capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("obj, why", [
    ([1, 2, 3], "holds a list, not a checkpoint"),
    (torch.zeros(3), "holds a Tensor, not a checkpoint"),
    ({"version": 1, "step": 6}, "has no 'config'"),
])
def test_an_intact_checkpoint_of_the_wrong_type_is_named_and_skipped(killed, tmp_path, capsys,
                                                                      obj, why):
    run = _copy(killed, tmp_path) / "run"
    path = _replace_checkpoint(run, 6, obj)
    err = _resume(run, capsys)
    assert f"checkpoint {path}: {why}; using the previous one" in err, err
    meta = json.loads((run / "meta.json").read_text())
    assert meta["resumes"][-1]["step"] == 4  # the one before it
    assert json.loads((run / "summary.json").read_text())["status"] == "completed"


def test_a_checkpoint_holding_other_weights_is_named_and_skipped(killed, tmp_path, capsys):
    run = _copy(killed, tmp_path) / "run"
    state = torch.load(checkpoint.folder(run) / "step-00000006.pt", weights_only=True)
    state["model"] = {k: v[..., :1] if v.dim() else v for k, v in state["model"].items()}
    path = _replace_checkpoint(run, 6, state)
    err = _resume(run, capsys)
    assert any(line.startswith(f"checkpoint {path}: holds model weight") for line in err), err
    assert json.loads((run / "meta.json").read_text())["resumes"][-1]["step"] == 4


def test_a_log_with_invalid_bytes_where_a_checkpoint_read_it_skips_that_checkpoint(
        killed, tmp_path, capsys):
    run = _copy(killed, tmp_path) / "run"
    log = run / "metrics.jsonl.partial"
    data = bytearray(log.read_bytes())
    first_row_end = data.index(b"\n")
    data[first_row_end - 5:first_row_end - 3] = b"\xff\xfe"  # inside the first row
    log.write_bytes(bytes(data))
    err = _resume(run, capsys)
    assert sum("metrics.jsonl.partial it had logged are damaged" in line for line in err) == 3
    assert err[3].endswith("no usable checkpoint; training again from step 0"), err
    rows = (run / "metrics.jsonl").read_text().splitlines()  # written again, valid
    assert [json.loads(r)["step"] for r in rows][0] == 0
    assert "resumes" not in json.loads((run / "meta.json").read_text())


def test_a_checkpoint_that_is_a_fifo_is_skipped_without_blocking(killed, tmp_path, capsys):
    import os

    run = _copy(killed, tmp_path) / "run"
    newest = checkpoint.folder(run) / "step-00000006.pt"
    newest.unlink()
    os.mkfifo(newest)
    err = _resume(run, capsys)
    assert f"checkpoint {newest}: is not a regular file; using the previous one" in err
    assert json.loads((run / "meta.json").read_text())["resumes"][-1]["step"] == 4


def test_a_checkpoint_that_is_a_folder_is_refused(killed, tmp_path, capsys):
    sandbox = _copy(killed, tmp_path)
    middle = checkpoint.folder(sandbox / "run") / "step-00000004.pt"
    middle.unlink()
    middle.mkdir()
    refused(["train", "--resume", "run"], sandbox, capsys,
            expect="step-00000004.pt is a folder, where the run writes a checkpoint file")


def test_a_log_row_that_is_no_record_skips_the_checkpoints_that_logged_it(killed, tmp_path,
                                                                          capsys):
    run = _copy(killed, tmp_path) / "run"
    log = run / "metrics.jsonl.partial"
    rows = log.read_bytes().split(b"\n")
    rows[0] = b"[1]".ljust(len(rows[0]))  # valid JSON, same length: no record
    log.write_bytes(b"\n".join(rows))
    err = _resume(run, capsys)
    assert sum("damaged (a line that is not a JSON object)" in line for line in err) == 3, err
    assert json.loads((run / "summary.json").read_text())["status"] == "completed"
