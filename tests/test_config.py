import json
from pathlib import Path

import pytest

from spikebench import config as c
from spikebench.errors import UserError


def test_defaults_resolve_gpt_tiny():
    cfg = c.load()
    assert cfg.model.preset == "gpt-tiny"
    assert (cfg.model.n_layer, cfg.model.n_embd) == (2, 64)
    assert cfg.data.corpus == "stdlib"


def test_preset_then_file_then_overrides(tmp_path):
    f = tmp_path / "run.toml"
    f.write_text('[model]\npreset = "gpt-small"\nn_layer = 3\n[optim]\nlr = 1e-2\n')
    cfg = c.load(f, ["optim.lr=2e-3", "optim.clip=1.0", "precision.mode=bf16"])
    assert cfg.model.n_embd == 384  # from the preset
    assert cfg.model.n_layer == 3  # the file beats the preset
    assert cfg.optim.lr == 2e-3  # --set beats the file
    assert cfg.optim.clip == 1.0 and cfg.precision.mode == "bf16"


def test_clip_off_round_trips_through_json():
    cfg = c.load(None, ["optim.clip=off"])
    assert cfg.optim.clip is None
    again = c.from_dict(json.loads(cfg.to_json()))
    assert again == cfg


def test_token_budget_sets_steps():
    cfg = c.load(None, ["train.tokens=100000", "data.batch_size=8", "data.seq_len=64"])
    assert cfg.train.steps == 196  # ceil(100000 / (8 * 64))
    assert c.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(UserError) as e:
        c.load(None, ["train.tokens=100000", "train.steps=10"])
    assert "train.tokens = 100000: set one budget" in str(e.value)
    # A budget override replaces the file's budget of either kind.
    assert c.resolve({"train": {"steps": 7}}, ["train.tokens=1024"]).train.steps == 1
    cfg = c.resolve({"train": {"tokens": 10**6}}, ["train.steps=5"])
    assert (cfg.train.steps, cfg.train.tokens) == (5, None)
    with pytest.raises(UserError) as e:
        c.load(None, ["train.tokens=0"])
    assert "train.tokens = 0: must be in [1, inf]" in str(e.value)


def test_int_accepted_for_float():
    assert c.load(None, ["optim.lr=1"]).optim.lr == 1.0


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("schedule.warmup_ratio=-0.1", "schedule.warmup_ratio = -0.1: must be in [0, 1]"),
        ("schedule.warmup_ratio=1.5", "schedule.warmup_ratio = 1.5"),
        ("precision.mode=fp8", "precision.mode = 'fp8': must be one of"),
        ("optim.clip=0", 'optim.clip = 0.0: must be in (0, inf] or "off"'),
        ("optim.clip=-2", "optim.clip = -2.0"),
        ("data.seq_len=512", "data.seq_len = 512: must be <= model.block_size = 128"),
        ("model.nope=1", "unknown key 'model.nope'"),
        ("nope.x=1", "unknown key 'nope'"),
        ("train.steps=1.5", "train.steps = 1.5: must be an integer"),
        ("train.steps=true", "train.steps = True: must be an integer"),
        ("optim.lr=fast", "optim.lr = 'fast': must be a number"),
        ("model.n_head=3", "model.n_embd = 64: must be divisible by model.n_head = 3"),
        ("model.preset=gpt-huge", "model.preset = 'gpt-huge': no such preset"),
        ("optim.grad_accum=3", "optim.grad_accum = 3: must divide data.batch_size = 16"),
        ("lr", "--set 'lr': must look like key=value"),
        ("schedule.warmup_ratio=nan", "schedule.warmup_ratio = nan: must be a finite number"),
        ("optim.lr=inf", "optim.lr = inf: must be a finite number"),
        ("optim.clip=nan", "optim.clip = nan: must be a finite number"),
        ("model=3", "model = 3: must be a table"),
    ],
)
def test_bad_values_one_line_error(override, fragment):
    with pytest.raises(UserError) as e:
        c.load(None, [override])
    msg = str(e.value)
    assert fragment in msg
    assert "\n" not in msg


def test_bad_toml_file(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("[model\n")
    with pytest.raises(UserError, match="not valid TOML"):
        c.load(f)
    with pytest.raises(UserError, match="not found"):
        c.load(tmp_path / "missing.toml")


def test_user_preset_by_path(tmp_path):
    p = tmp_path / "mine.toml"
    p.write_text('[model]\ncls = "mypkg.models:MyGPT"\nn_layer = 1\n')
    cfg = c.load(None, [f'model.preset="{p}"'])
    assert cfg.model.cls == "mypkg.models:MyGPT" and cfg.model.n_layer == 1


BIG = "9" * 5000  # past Python's 4300-digit int-string limit


@pytest.mark.parametrize("override, fragment", [
    (f"train.seed={BIG}", "--set train.seed=99999999999999999999...: a number of 5000 digits"),
    (f"optim.lr={BIG}", "a number of 5000 digits"),
    (f"optim.lr=[{BIG}]", "a number of 5000 digits"),
    ("optim.lr=" + "[" * 5000 + "]" * 5000, "nested too deeply"),
    ("optim.lr=" + "[" * 40 + "1" + "]" * 40, "nested more than 32 levels deep"),
    ("optim.lr=" + "{a=" * 40 + "1" + "}" * 40, "nested more than 32 levels deep"),
    (f"optim.lr=1{'0' * 400}", "optim.lr = 10000000000000000000... (401 digits): must be a "
                               "finite number"),
    ('run.out_dir=""', "run.out_dir = '': must name a folder"),
    ('run.out_dir="  "', "run.out_dir = '  ': must name a folder"),
])
def test_huge_numbers_deep_nesting_and_empty_folders_in_set(override, fragment):
    with pytest.raises(UserError) as e:
        c.load(None, [override])
    assert fragment in str(e.value) and "\n" not in str(e.value)
    assert len(str(e.value)) < 400


@pytest.mark.parametrize("text, fragment", [
    ("[optim]\nlr = " + "[" * 5000 + "]" * 5000, "nested more than 32 levels deep"),
    ("[optim]\nlr = " + "[" * 40 + "]" * 40, "nested more than 32 levels deep"),
    ("a" + ".a" * 5000 + " = 1\n", "nested more than 32 levels deep"),
    ("[a" + ".a" * 5000 + "]\n", "nested more than 32 levels deep"),
    (f"[train]\nseed = {BIG}\n", "holds a number too long to read"),
])
def test_deep_or_huge_toml_files(tmp_path, text, fragment):
    f = tmp_path / "c.toml"
    f.write_text(text)
    with pytest.raises(UserError) as e:
        c.load(f)
    assert fragment in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("text, fragment", [
    ("[" * 100_000, "nested more than 32 levels deep"),
    ('{"optim": ' + "[" * 50 + "]" * 50 + "}", "nested more than 32 levels deep"),
    ('{"train": {"seed": ' + BIG + "}}", "not a valid JSON config"),
])
def test_deep_or_huge_run_config_json(tmp_path, text, fragment):
    f = tmp_path / "config.json"
    f.write_text(text)
    with pytest.raises(UserError) as e:
        c.load(f)
    assert fragment in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("name", ["c.toml", "config.json"])
def test_a_config_path_that_is_a_fifo_is_named_not_opened(tmp_path, name):
    import os

    fifo = tmp_path / name
    os.mkfifo(fifo)  # opening it would block for ever: no writer
    with pytest.raises(UserError, match=r"is a FIFO \(named pipe\); must be a regular file"):
        c.load(fifo)


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/null"])
def test_a_config_path_that_is_a_device_is_named_not_read(path):
    from spikebench.config.load import load_run_json

    for load in (c.load, load_run_json):  # a TOML config, a run's config.json
        with pytest.raises(UserError, match="is a character device; must be a regular file"):
            load(path)


def test_an_automatic_cleaning_cache_stays_in_the_output_folder():
    from spikebench.config import CleanConfig
    from spikebench.data.clean.run import cache_folder

    assert CleanConfig().cache_dir == "auto"
    assert cache_folder(CleanConfig(), "out/runs") == Path("out/runs/.clean-cache")
    assert cache_folder(CleanConfig(), None) is None  # no output folder: no cache
    assert cache_folder(CleanConfig(cache_dir=""), "out") is None
    assert cache_folder(CleanConfig(cache_dir="/c"), "out") == Path("/c")
