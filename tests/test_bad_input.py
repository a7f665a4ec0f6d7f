"""The fuzzing reproducers: each is refused in one line with exit code 2, leaving no run
folder behind (or, where the input is valid, does what it says)."""

import json

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
