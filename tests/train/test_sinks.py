import io
import json
import math

from spikebench.train.sinks import JsonlSink, ProgressBar

RUN = {"precision": "bf16 (emulated)", "n_params": 1234, "environment": {"device": "cpu"},
       "run_dir": "results/runs/x"}


def test_progress_lines_all_name_the_precision():
    out = io.StringIO()
    bar = ProgressBar(20, stream=out)
    bar.start(RUN)
    for step in range(1, 21):
        bar.write({"step": step, "train/loss": 3.0, **({"val/loss": 2.9} if step == 20 else {})})
    bar.close({"status": "completed", "steps": 20, "final_val_loss": 2.9})
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and all("bf16 (emulated)" in line for line in lines)
    assert "1,234 parameters on cpu" in lines[0]
    assert lines[-1].endswith("completed after 20 steps, final val loss 2.9000")


def test_jsonl_sink_appears_only_when_closed(tmp_path):
    sink = JsonlSink(tmp_path / "metrics.jsonl")
    sink.write({"step": 1, "train/loss": math.nan})
    assert not (tmp_path / "metrics.jsonl").exists()
    sink.close()
    row = json.loads((tmp_path / "metrics.jsonl").read_text())
    assert row["step"] == 1 and math.isnan(row["train/loss"])  # NaN kept, as Python writes it
