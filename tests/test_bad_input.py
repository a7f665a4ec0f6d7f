"""The fuzzing reproducers: each is refused in one line with exit code 2, leaving no run
folder behind (or, where the input is valid, does what it says)."""

import json
import os

import pytest

from spikebench.cli import main

B = ["--set", "train.steps=1", "--set", "data.max_bytes=200000", "--set",
     "train.progress=false"]
LONG = "a" * 300


def _refused(capsys, argv, needle, out_dir=None):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("spikebench ") and needle in err, err
    assert "Traceback" not in err
    if out_dir is not None:
        assert not out_dir.exists() or not any(out_dir.iterdir())


@pytest.mark.parametrize("sets, needle", [
    (["model.vocab_size=7"], "model.vocab_size = 7: must be >= 256 for a byte corpus"),
    (["precision.mode=fp16", "precision.init_scale=1e300"], "precision.init_scale = 1e+300"),
    (["precision.mode=fp16", "precision.init_scale=1e-300"], "precision.init_scale = 1e-300"),
    (["train.device=meta"], "train.device = 'meta': must be auto, cpu, cuda or cuda:N"),
    (["train.device=mps"], "train.device = 'mps'"),
    (["train.device=hpu"], "train.device = 'hpu'"),
    (["train.device=privateuseone"], "train.device = 'privateuseone'"),
    (["train.threads=100000000000000000000"], "train.threads = 100000000000000000000"),
    (["data.max_bytes=1000000000000000000000"], "data.max_bytes = 1000000000000000000000"),
    ([f"data.corpus={LONG}"], "data.corpus = 'aaaa"),
    ([f"model.preset={LONG}"], "model.preset = 'aaaa"),
    ([f"faults.domain_corpus={LONG}"], "faults.domain_corpus = 'aaaa"),
    ([f"run.name={LONG}"], "run.name = 'aaaa"),
    (['run.name="a\\u0000b"'], "must not contain a NUL character"),
    (["model.cls=torch.nn:Linear"], "model.cls = 'torch.nn:Linear': cannot be built"),
    (["model.cls=os:getcwd"], "not a torch.nn.Module subclass"),
    (["model.cls=builtins:dict"], "not a torch.nn.Module subclass"),
    (["train.seed=1979-05-27"], "a TOML date or time"),
    (["run.name=.."], "run.name = '..': must be one plain folder name"),
    (["run.name=."], "run.name = '.'"),
    (["run.name=../x"], "run.name = '../x'"),
    (['data.corpus=""'], 'data.corpus = "": must be "stdlib" or a path'),
    (["faults.burst=repeat", "faults.at=1.0"], "faults.at = 1.0: the burst would start"),
    (["faults.lr_shock_at=1.0"], "faults.lr_shock_at = 1.0"),
    (["faults.burst=repeat", "faults.at=0.99", "faults.length=1000"], "faults.length = 1000"),
    (["faults.burst=repeat", "faults.length=1", "faults.rows=1e-300"],
     "faults.rows = 1e-300: injects no row"),
])
def test_train_refuses_in_one_line(capsys, tmp_path, sets, needle):
    out = tmp_path / "out"
    argv = ["train", *B, "--set", f"run.out_dir={out}"]
    for s in sets:
        argv += ["--set", s]
    _refused(capsys, argv, needle, out)
    _refused(capsys, [*argv, "--dry-run"], needle, out)


def test_out_dir_naming_a_file(capsys, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    _refused(capsys, ["train", *B, "--set", f"run.out_dir={f}"], "is a file, not a folder")


@pytest.mark.parametrize("line, needle", [("[" * 100_000, "not valid JSON"),
                                          ('{"text": ' + "9" * 5000 + "}", "not valid JSON")])
def test_jsonl_corpus_lines_past_the_parsers_limits(capsys, tmp_path, line, needle):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"text": "' + "x" * 3000 + '"}\n' + line + "\n")
    _refused(capsys, ["train", *B, "--set", f"data.corpus={corpus}",
                      "--set", f"run.out_dir={tmp_path / 'out'}"], needle, tmp_path / "out")


def test_a_budget_switched_off_on_the_command_line_keeps_the_files(tmp_path, capsys):
    f = tmp_path / "c.toml"
    f.write_text("[train]\nsteps = 5\n")
    assert main(["train", str(f), "--set", "train.tokens=off", "--dry-run"]) == 0
    assert json.loads(capsys.readouterr().out)["train"]["steps"] == 5


@pytest.mark.parametrize("text, needle", [
    ("\ufeff[optim]\nlr = 0.01\n", None),  # a byte-order mark is not part of the TOML
    ("[optim]\nlr = nan\n", "optim.lr = nan: must be a finite number"),
])
def test_config_files(tmp_path, capsys, text, needle):
    f = tmp_path / "c.toml"
    f.write_text(text, encoding="utf-8")
    if needle is None:
        assert main(["train", str(f), "--dry-run"]) == 0
        assert json.loads(capsys.readouterr().out)["optim"]["lr"] == 0.01
    else:
        _refused(capsys, ["train", str(f), "--dry-run"], needle)


def test_a_config_path_that_is_a_folder(tmp_path, capsys):
    _refused(capsys, ["train", str(tmp_path), "--dry-run"], "is a folder, not a TOML file")


def test_a_preset_whose_model_is_not_a_table(tmp_path, capsys):
    p = tmp_path / "p.toml"
    p.write_text("model = 5\n")
    _refused(capsys, ["train", "--set", f"model.preset={p}", "--dry-run"],
             "model = 5: must be a table")


@pytest.mark.parametrize("body, needle", [
    ("[study]\nseeds = [[0]]\ntarget_loss = 3.0", "study.seeds = [[0]]"),
    ("[study]\ntarget_loss = 3.0\nsampler = 3", "study.sampler = 3: must be one of tpe"),
    ("[study]\ntarget_loss = 3.0\nnotes = 1979-05-27", "a TOML date or time"),
    ('[study]\ntarget_loss = 3.0\n[space]\n"optim.lr" = { low = 1e-4, high = 1e-2, '
     'log = "false" }', 'log = "false": must be true or false'),
    ('[study]\ntarget_loss = 3.0\n[space]\n"optim.lr" = { low = 1e-4, high = 1e-2, int = "no" }',
     'int = "no": must be true or false'),
    ('[study]\ntarget_loss = 3.0\n[space]\n"optim.lr" = { low = 1e-4, high = 1e-2, off = true }',
     'optim.lr has no "off"'),
    ('[study]\ntarget_loss = 3.0\n[space]\n"train.seed" = { low = 0, high = 5, int = true }',
     "train.seed is set by study.seeds"),
    ("[study]\ntarget_loss = 3.0\n[config]\nmodel.vocab_size = 10", "model.vocab_size = 10"),
    ('[study]\ntarget_loss = 3.0\n[space]\n"optim.lr" = { low = nan, high = 1e-2 }',
     "low = nan: must be a finite number"),
    ("[study]\ntarget_loss = 3.0\n[space]\noptim.lr = { low = 1e-4, high = 1e-2 }",
     'a dotted key must be quoted: "optim.lr"'),
])
def test_sweep_files_refused_in_one_line(tmp_path, capsys, body, needle):
    f = tmp_path / "s.toml"
    f.write_text(body + "\n")
    _refused(capsys, ["sweep", str(f), "--dry-run", "--results", str(tmp_path / "r")], needle)


# Model classes a user might name: each refused in one line by the preflight, dry run or
# not, before any data is read or any run folder made.
MODULES = {
    "syntax": "def broken(:\n",
    "raises": "raise RuntimeError('no GPU driver here')\n",
    "exits": "import sys\nsys.exit(7)\n",
    "interrupts": "raise KeyboardInterrupt\n",
    "noforward": ("import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, cfg):\n"
                  "        super().__init__()\n        self.w = nn.Linear(4, 4)\n"),
    "tensor": ("import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, cfg):\n"
               "        super().__init__()\n        self.e = nn.Embedding(cfg.vocab_size, 8)\n"
               "    def forward(self, idx, targets=None):\n        return self.e(idx)\n"),
    "triple": ("import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, cfg):\n"
               "        super().__init__()\n        self.e = nn.Embedding(cfg.vocab_size, 8)\n"
               "    def forward(self, idx, targets=None):\n        x = self.e(idx)\n"
               "        return x, x.mean(), 0\n"),
    "vector": ("import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, cfg):\n"
               "        super().__init__()\n        self.e = nn.Embedding(cfg.vocab_size, 8)\n"
               "    def forward(self, idx, targets=None):\n        x = self.e(idx)\n"
               "        return x, x.mean(-1)\n"),
    "detached": ("import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, cfg):\n"
                 "        super().__init__()\n        self.e = nn.Embedding(cfg.vocab_size, 8)\n"
                 "    def forward(self, idx, targets=None):\n        x = self.e(idx)\n"
                 "        return x, x.mean().detach()\n"),
    "fails": ("import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, cfg):\n"
              "        super().__init__()\n        self.w = nn.Linear(3, 3)\n"
              "    def forward(self, idx, targets=None):\n        return self.w(idx), None\n"),
}
MODEL_CASES = [
    ("..x:Y", "must look like package.module:Class (an absolute module path"),
    (".x:Y", "must look like package.module:Class"),
    ("a b:C", "must look like package.module:Class"),
    ("os:", "must look like package.module:Class"),
    ("{syntax}:M", "cannot import (SyntaxError: "),
    ("{raises}:M", "cannot import (RuntimeError: no GPU driver here)"),
    ("{exits}:M", "called sys.exit(7) while being imported"),
    ("{interrupts}:M", "raised KeyboardInterrupt while being imported, with no Ctrl-C"),
    ("{noforward}:M", "has no forward method; it must define forward(idx, targets)"),
    ("{tensor}:M", "forward(idx, targets) returned a Tensor; it must return (logits, loss)"),
    ("{triple}:M", "returned a tuple of 3; it must return (logits, loss)"),
    ("{vector}:M", "returned a loss that is a tensor of shape (1, 128)"),
    ("{detached}:M", "returned a loss that does not require grad"),
    ("{fails}:M", "forward(idx, targets) fails on a (1, 128) batch (RuntimeError"),
]


@pytest.mark.parametrize("cls, needle", MODEL_CASES)
def test_a_model_class_that_cannot_train_is_refused_in_the_preflight(
        tmp_path, capsys, monkeypatch, cls, needle):
    import uuid

    mods = tmp_path / "mods"
    mods.mkdir()
    monkeypatch.syspath_prepend(str(mods))
    monkeypatch.setattr("sys.dont_write_bytecode", True)
    names = {}
    for key, body in MODULES.items():
        names[key] = f"m_{key}_{uuid.uuid4().hex[:8]}"  # never one sys.modules has seen
        (mods / f"{names[key]}.py").write_text(body)
    out = tmp_path / "out"
    argv = ["train", *B, "--set", f"run.out_dir={out}", "--set",
            f"model.cls={cls.format(**names)}"]
    _refused(capsys, argv, needle, out)
    _refused(capsys, [*argv, "--dry-run"], needle, out)
    assert not out.exists()


@pytest.mark.parametrize("sets, needle", [
    (["data.batch_size=100000000"], "data.batch_size = 100000000: the run needs at least"),
    (["model.n_embd=1000000"], "model.n_embd = 1000000: the run needs at least"),
    (["train.eval_batches=100000000"], "train.eval_batches = 100000000: the run needs at least"),
    (["model.n_layer=100000000"], "model.n_layer = 100000000: the run needs at least"),
    (["model.vocab_size=100000000000"], "model.vocab_size = 100000000000: the run needs"),
    ([f"data.batch_size=1{'0' * 400}"], "about 10^"),
])
def test_sizes_that_cannot_fit_are_refused_before_anything_is_allocated(
        tmp_path, capsys, sets, needle):
    out = tmp_path / "out"
    argv = ["train", *B, "--set", f"run.out_dir={out}", *[a for s in sets for a in ("--set", s)]]
    for extra in ([], ["--dry-run"]):
        _refused(capsys, [*argv, *extra], needle, out)


def test_the_memory_estimate_is_a_lower_bound_that_passes_the_default_run():
    from spikebench import config as c
    from spikebench.train.setup import gpt_params, memory_needed

    cfg = c.load(None, [])
    assert sum(memory_needed(cfg, gpt_params(cfg)).values()) < 50_000_000  # 2 MB of weights
    big = c.load(None, ["train.eval_batches=100000000"])
    assert memory_needed(big, 0)["validation batches"] == 2 * 8 * 10**8 * 16 * 128


@pytest.mark.parametrize("sets, needle", [
    ([f"train.seed={'7' * 250}"], "train.seed = 777777777777777777777777... (250 characters): "
                                  "the automatic run name"),
    ([f"train.seed={'7' * 224}"], "would be 250 bytes, longer than the 249 allowed"),
])
def test_an_automatic_run_name_too_long_for_the_file_system_before_data(
        tmp_path, capsys, monkeypatch, sets, needle):
    import spikebench.train.loop as loop

    def no_data(*a, **k):
        raise AssertionError("the corpus was loaded")

    monkeypatch.setattr(loop, "load_corpus", no_data)
    out = tmp_path / "out"
    argv = ["train", *B, "--set", f"run.out_dir={out}", *[a for s in sets for a in ("--set", s)]]
    _refused(capsys, argv, needle, out)
    _refused(capsys, [*argv, "--dry-run"], needle, out)


def test_an_automatic_run_name_that_fits_passes(capsys):
    assert main(["train", "--dry-run", "--set", f"train.seed={'7' * 223}"]) == 0
    capsys.readouterr()


def test_an_empty_out_dir_is_refused_not_the_working_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _refused(capsys, ["train", *B, "--set", 'run.out_dir=""'], "run.out_dir = '': must name")
    assert not any(tmp_path.iterdir())


def test_the_cleaning_cache_goes_into_the_output_folder(tmp_path, capsys, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    out = tmp_path / "out"
    assert main(["train", *B, "--set", f"run.out_dir={out}", "--set", "clean.quality=true",
                 "--set", "run.name=r"]) == 0
    capsys.readouterr()
    assert not any(work.iterdir()), list(work.iterdir())  # no ./results/.clean-cache
    assert list((out / ".clean-cache").glob("*.json"))
    assert json.loads((out / "r" / "config.json").read_text())["clean"]["cache_dir"] == "auto"


@pytest.mark.parametrize("host", ["a" * 64, "a" * 64 + ".example", "bad..host", "a b"])
def test_train_refuses_a_metrics_host_that_is_no_host_name(tmp_path, capsys, host):
    out = tmp_path / "out"
    _refused(capsys, ["train", *B, "--set", f"run.out_dir={out}", "--metrics-port", "0",
                      "--metrics-host", host], f"--metrics-host {host!r}: not a host name", out)


def test_serve_names_a_bad_host_itself():
    from spikebench.errors import UserError
    from spikebench.live.server import serve

    with pytest.raises(UserError, match="--metrics-host 'x..y': not a host name or address"):
        serve(None, 0, "x..y")


def test_a_report_on_a_wal_mode_study_leaves_its_folder_byte_identical(tmp_path, capsys):
    import sqlite3
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "report"))
    from fixtures import make_study
    from fuzzkit import snapshot

    folder = make_study(tmp_path, folder="wal", arms={"baseline": {}}, search=1, seeds=(0,))
    con = sqlite3.connect(folder / "study.db")
    assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    con.close()
    before = snapshot(folder)
    assert not [p for p in before if p.name.endswith(("-wal", "-shm"))]
    assert main(["report", str(folder), "--out", str(tmp_path / "reports")]) == 0
    capsys.readouterr()
    assert snapshot(folder) == before  # no study.db-wal or -shm beside it, nothing changed
    assert (tmp_path / "reports" / "wal" / "report.md").is_file()


def test_a_report_reads_what_only_the_wal_holds(tmp_path, capsys):
    import sqlite3
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "report"))
    from fixtures import make_study
    from fuzzkit import snapshot

    from spikebench.report.data import load_study

    folder = make_study(tmp_path, folder="live", arms={"baseline": {}}, search=1, seeds=(0,))
    con = sqlite3.connect(folder / "study.db")
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("UPDATE studies SET study_name = 'renamed'")
    con.commit()  # committed into the -wal only; the connection stays open, as a live sweep's
    try:
        before = snapshot(folder)
        assert (folder / "study.db-wal").stat().st_size > 0
        assert load_study(folder).name == "renamed"
        assert snapshot(folder) == before
    finally:
        con.close()


def test_a_model_whose_forward_reads_a_value_still_passes_the_preflight(tmp_path, capsys,
                                                                        monkeypatch):
    # .item() cannot run on the meta device: the check stands aside, the run checks it.
    mods = tmp_path / "mods"
    mods.mkdir()
    monkeypatch.syspath_prepend(str(mods))
    monkeypatch.setattr("sys.dont_write_bytecode", True)
    (mods / "m_reads_value.py").write_text(
        "import torch.nn as nn\nimport torch.nn.functional as F\n"
        "class M(nn.Module):\n    def __init__(self, cfg):\n        super().__init__()\n"
        "        self.e = nn.Embedding(cfg.vocab_size, cfg.vocab_size)\n"
        "    def forward(self, idx, targets=None):\n        logits = self.e(idx)\n"
        "        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())\n"
        "        if loss.item() > 1e9:\n            raise RuntimeError('diverged')\n"
        "        return logits, loss\n")
    assert main(["train", "--dry-run", "--set", "model.cls=m_reads_value:M"]) == 0
    capsys.readouterr()


def test_a_real_ctrl_c_while_the_model_module_imports_is_still_an_interrupt(tmp_path):
    """The module's own KeyboardInterrupt is refused as bad input (above); a SIGINT that
    really arrives while it is being imported stays "interrupted", exit 130."""
    import signal
    import subprocess
    import sys
    import time

    mods = tmp_path / "mods"
    mods.mkdir()
    started = tmp_path / "importing"
    (mods / "slow_import.py").write_text(
        f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(60)\n")
    env = {**os.environ, "PYTHONPATH": str(mods)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "spikebench", "train", *B, "--set",
         f"run.out_dir={tmp_path / 'out'}", "--set", "model.cls=slow_import:M"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert started.exists(), proc.communicate()[1]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
