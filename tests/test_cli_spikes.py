import json
import subprocess
import sys

import numpy as np
import pytest

from spikebench.cli import build_parser, cmd_spikes, main
from spikebench.spikes.synthetic import generate


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    d = tmp_path_factory.mktemp("logs")
    lg = generate(3, 3000, early_jump=True)
    lg.to_frame().to_csv(d / "run.csv", index=False)
    with (d / "metrics.jsonl").open("w") as f:
        for r in lg.records():
            f.write(json.dumps(r) + "\n")
            if r["step"] % 500 == 0:
                f.write(json.dumps({"step": r["step"], "val/loss": 3.0}) + "\n")
    lg.to_frame()[["step", "loss"]].rename(columns={"step": "Step"}).to_csv(d / "noggrad.csv", index=False)
    return d, lg


def run_json(capsys, *argv):
    assert main(["spikes", *argv, "--json"]) == 0
    out, err = capsys.readouterr()
    return json.loads(out), err


def test_json_output_schema(capsys, logs):
    d, lg = logs
    res, err = run_json(capsys, str(d / "run.csv"))
    assert set(res) == {"steps", "step_column", "loss_column", "grad_column", "events",
                        "spike_score"} and res["steps"] == 3000
    assert set(res["spike_score"]) == {"loss", "grad_norm"}
    for e in res["events"]:
        assert set(e) == {"onset", "peak", "metric", "height_sigma", "recovery_steps", "height"}
        assert e["metric"] in ("loss", "grad_norm")
        assert isinstance(e["height"], float) and e["height"] > 0  # metric units, upward
    early = lg.spikes[0]
    assert any(e["onset"] == early.onset and e["metric"] == "loss" for e in res["events"])
    res2, _ = run_json(capsys, str(d / "metrics.jsonl"))
    assert (res2["loss_column"], res2["grad_column"]) == ("train/loss", "optim/grad_norm")
    cols = ("step_column", "loss_column", "grad_column")
    assert ({k: v for k, v in res2.items() if k not in cols}
            == {k: v for k, v in res.items() if k not in cols})  # the same data and events


def test_early_jump_has_height_in_nats_without_sigma(capsys, tmp_path):
    # A 3.5-nat jump at step 2: fewer than 4 values before it, so no noise scale and
    # height_sigma is null, but the height in the metric's units is still reported.
    rng = np.random.default_rng(0)
    loss = [5.55, 5.50, 9.0, 8.0, 7.0, 6.0] + list(5.4 - 0.001 * np.arange(60)
                                                    + rng.normal(0, 0.01, 60))
    f = tmp_path / "early.csv"
    f.write_text("step,loss\n" + "".join(f"{i},{x}\n" for i, x in enumerate(loss)))
    res, _ = run_json(capsys, str(f))
    (ev,) = res["events"]
    assert (ev["onset"], ev["peak"], ev["metric"]) == (2, 2, "loss")
    assert ev["height_sigma"] is None
    assert ev["height"] == pytest.approx(9.0 - (5.55 + 5.50) / 2)  # peak - median level
    assert main(["spikes", str(f)]) == 0
    out = capsys.readouterr().out
    header, _, row = out.splitlines()[1:4]
    assert header.split()[:5] == ["onset", "peak", "metric", "height", "height"]
    assert row.split()[:5] == ["2", "2", "loss", "3.47", "-"]


def test_no_grad_column_gives_null(capsys, logs):
    d, _ = logs
    res, _ = run_json(capsys, str(d / "noggrad.csv"))
    assert res["spike_score"]["grad_norm"] is None
    assert all(e["metric"] == "loss" for e in res["events"])


def test_table_detector_and_plot(capsys, logs, tmp_path):
    d, _ = logs
    png = tmp_path / "out.png"
    assert main(["spikes", str(d / "run.csv"), "--detector", "zscore", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "onset" in out and "spike score" in out and "zscore" in out
    assert png.stat().st_size > 1000


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["missing.csv"], "missing.csv"),
        (["{csv}", "--metric", "nope"], "'nope'"),
        (["{csv}", "--detector", "bogus"], "bogus"),
        (["{bad}"], "'abc'"),
        (["{empty}"], "empty"),
        ([], "PATH"),
    ],
)
def test_errors_one_line_exit_2(capsys, logs, tmp_path, argv, needle):
    d, _ = logs
    (tmp_path / "bad.csv").write_text("step,loss\n0,1\n1,abc\n")
    (tmp_path / "empty.csv").write_text("")
    argv = [a.format(csv=d / "run.csv", bad=tmp_path / "bad.csv", empty=tmp_path / "empty.csv")
            for a in argv]
    assert main(["spikes", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("spikebench spikes: error:") and needle in err


def test_add_parser_wires_run():
    args = build_parser().parse_args(["spikes", "x.csv", "--json", "--detector", "olmo"])
    assert args.func is cmd_spikes and args.detector == "olmo" and args.json


def test_subprocess_json_only_on_stdout(logs):
    d, _ = logs
    p = subprocess.run(
        [sys.executable, "-m", "spikebench", "spikes", str(d / "metrics.jsonl"), "--json"],
        capture_output=True, text=True, timeout=60,
    )
    assert p.returncode == 0, p.stderr
    json.loads(p.stdout)
    bad = subprocess.run(
        [sys.executable, "-m", "spikebench", "spikes", str(d / "nope.jsonl")],
        capture_output=True, text=True, timeout=60,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stdout == ""


@pytest.mark.parametrize("plot", ["", "{d}", "{d}/plot.pdf"])
def test_plot_path_must_be_a_png_file(capsys, logs, plot):
    d, _ = logs
    assert main(["spikes", str(d / "run.csv"), "--plot", plot.format(d=d)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "must be the path of a .png file" in err


@pytest.mark.parametrize("detector", ["default", "zscore", "olmo", "olmo_online", "loss_ratio",
                                      "persistent"])
def test_json_is_what_the_monitor_finds_row_by_row(capsys, logs, detector):
    # The command scores a log whole (spikebench.spikes.offline); the reference is the
    # online monitor fed every row, as the command did before.
    from spikebench.runs.spikes_command import JSON_EVENT_KEYS
    from spikebench.runs.text import read_log
    from spikebench.scoring.run import score_log

    d, _ = logs
    res, _ = run_json(capsys, str(d / "run.csv"), "--detector", detector)
    ref = score_log(read_log(d / "run.csv"), rule=detector)
    assert res == json.loads(json.dumps({
        "steps": ref["steps"], "step_column": "step", "loss_column": "loss",
        "grad_column": "grad_norm", "events": [{k: e[k] for k in JSON_EVENT_KEYS}
                                          for e in ref["events"]],
        "spike_score": ref["spike_score"]}))


@pytest.mark.parametrize("plot,needle", [("{t}/missing/out.png", "no folder"),
                                         ("{t}/" + "p" * 300 + ".png", "too long"),
                                         ("{csv}", "must be the path of a .png file")])
def test_a_plot_path_that_cannot_be_written_is_refused_before_reading(
        capsys, logs, tmp_path, plot, needle):
    d, _ = logs
    argv = ["spikes", str(d / "run.csv"), "--plot", plot.format(t=tmp_path, csv=d / "run.csv")]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and needle in err


def test_step_option_and_the_choice_between_step_columns(capsys, tmp_path):
    # W&B's _step beside the trainer's global step: the trainer's, said on stderr with --json
    # and in the header's note otherwise; --step picks either.
    rows = ["_step,train/global_step,train/loss"] + [
        f"{i},{i + 1},{5.0 if i + 1 == 40 else 3 - i / 100}" for i in range(80)]
    (tmp_path / "h.csv").write_text("\n".join(rows) + "\n")
    res, err = run_json(capsys, str(tmp_path / "h.csv"))
    assert [e["onset"] for e in res["events"]] == [40]
    assert "note: step column 'train/global_step'" in err
    res, err = run_json(capsys, str(tmp_path / "h.csv"), "--step", "_step")
    assert [e["onset"] for e in res["events"]] == [39] and err == ""
    assert main(["spikes", str(tmp_path / "h.csv"), "--step", "nope"]) == 2
    assert "--step nope: no column 'nope'" in capsys.readouterr().err


def test_target_loss_on_one_log(capsys, tmp_path):
    (tmp_path / "m.jsonl").write_text("".join(
        json.dumps({"step": s, "train/loss": 3 - s / 50}) + "\n"
        + (json.dumps({"step": s, "val/loss": 3.1 - s / 50}) + "\n" if s % 10 == 0 else "")
        for s in range(100)))
    res, _ = run_json(capsys, str(tmp_path / "m.jsonl"), "--target-loss", "2")
    assert res["time_to_target"] == {"target": 2.0, "metric": "val/loss", "step": 60}
    assert main(["spikes", str(tmp_path / "m.jsonl"), "--target-loss", "2"]) == 0
    assert "loss <= 2 (val/loss): first at step 60" in capsys.readouterr().out
    res, _ = run_json(capsys, str(tmp_path / "m.jsonl"), "--target-loss", "0")
    assert res["time_to_target"]["step"] is None
    assert main(["spikes", str(tmp_path / "m.jsonl"), "--target-loss", "nan"]) == 2
    assert "must be a finite number" in capsys.readouterr().err


def test_a_plain_log_keeps_the_fast_reader(capsys, logs, monkeypatch):
    """A plain CSV is read by spikebench.runs.text.read_log as before, not through the
    run readers (which build a record per step)."""
    import spikebench.runs.discover as discover

    d, _ = logs
    monkeypatch.setattr(discover, "discover", None)
    res, _ = run_json(capsys, str(d / "run.csv"))
    assert res["steps"] == 3000


@pytest.mark.parametrize("flag", ["--step", "--metric", "--grad-metric"])
def test_a_column_no_log_of_a_folder_has_is_blamed_on_its_flag(capsys, tmp_path, flag):
    (tmp_path / "runs").mkdir()
    for k in range(2):
        (tmp_path / "runs" / f"r{k}.csv").write_text("step,loss,gn\n0,3,1\n1,2.9,1\n")
    assert main(["spikes", str(tmp_path / "runs"), flag, "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"spikebench spikes: error: {flag} nope: no column 'nope' in any of the 2 log(s) "
        f"under {tmp_path / 'runs'} (the columns of {tmp_path / 'runs' / 'r0.csv'} it could "
        "name: "), err


@pytest.mark.parametrize("text", ["step,loss\n" + "9" * 200_000 + "\n",
                                  'step,loss\n0,"1\n' + "2,3\n" * 40_000])
def test_an_endless_field_is_one_line_naming_the_limit(capsys, tmp_path, text):
    (tmp_path / "log.csv").write_text(text)
    (tmp_path / "good.csv").write_text("step,loss\n0,3\n1,2.9\n")
    for path in (tmp_path / "log.csv", tmp_path):  # the fast reader and a folder's walk
        assert main(["spikes", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "a field longer than 131,072 characters" in err, err
