"""A report of a sweep whose files or stored attributes are damaged still comes out: each
damaged value is dropped, the trial is listed as damaged with the file (or attribute) and the
reason, and every section gets values of the shape it reads. A stored spec with a field of the
wrong type is an unreadable spec, as one this version cannot parse is."""

import json
import math
import shutil
import sqlite3

import pytest
from fixtures import make_study
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spikebench.cli import main
from spikebench.report.data import load_study, seed_log, trial_job
from spikebench.report.markdown import render_markdown
from spikebench.report.sections import report_info


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return make_study(tmp_path_factory.mktemp("damaged"), folder="base", seeds=(0, 1, 2, 3),
                      search=2)


def _db(folder):
    return sqlite3.connect(folder / "study.db")


def set_attr(folder, number, key, value_json):
    """Store a trial user attribute as raw JSON text, as Optuna keeps it."""
    con = _db(folder)
    tid = con.execute("SELECT trial_id FROM trials WHERE number = ?", (number,)).fetchone()[0]
    con.execute("DELETE FROM trial_user_attributes WHERE trial_id = ? AND key = ?", (tid, key))
    con.execute("INSERT INTO trial_user_attributes (trial_id, key, value_json) VALUES (?, ?, ?)",
                (tid, key, value_json))
    con.commit()
    con.close()


def set_spec(folder, spec_json):
    con = _db(folder)
    con.execute("UPDATE study_user_attributes SET value_json = ? WHERE key = 'spec'",
                (spec_json,))
    con.commit()
    con.close()


def stored_spec(folder):
    con = _db(folder)
    (text,) = con.execute("SELECT value_json FROM study_user_attributes WHERE key = 'spec'"
                          ).fetchone()
    con.close()
    return json.loads(text)


def report_text(study) -> str:
    """The whole markdown report of a loaded study, without drawing plots (they are drawn
    from the same infos; the command-line test draws them)."""
    return render_markdown(report_info(study), {})


def seed(folder, trial, s):
    return folder / "trials" / f"{trial:05d}" / f"seed-{s}"


DEEP = "[" * 100_000
HUGE = '{"step": 7, "train/loss": 1' + "0" * 5000 + "}"


def _damage_everything(d):
    """Damage of every kind, each in its own place: files of the baseline (trial 0, whose
    seeds the curves always read) and of the first seed's meta.json of trials 1 and 2 (read
    for the environment), attributes of trials 3-5, 7 and 8. Returns (trial, text) pairs
    its damage notes must contain."""
    m = seed(d, 0, 0) / "metrics.jsonl"
    lines = m.read_bytes().splitlines(keepends=True)
    m.write_bytes(b"".join(lines[:2] + [
        bytes(range(128, 256)) + b"\n", b'{"step": null, "train/loss": 1.0}\n', DEEP.encode() + b"\n",
        HUGE.encode() + b"\n", b'{"step": 9, "train/loss": 1' + b"0" * 400 + b"}\n",
        b'{"step": 18446744073709551616, "train/loss": 1.0}\n', b"[1, 2]\n"] + lines[2:]))
    (seed(d, 0, 1) / "summary.json").write_text('{"spikes": "x"}')
    text = (seed(d, 0, 2) / "summary.json").read_text()
    (seed(d, 0, 2) / "summary.json").write_text(text[: len(text) // 2])
    (seed(d, 0, 3) / "summary.json").write_text("[1, 2, 3]")
    (seed(d, 0, 3) / "meta.json").write_bytes(bytes(range(128, 256)))
    (seed(d, 0, 0) / "meta.json").write_text(
        '{"environment": {"python": 3}, "corpus": 5, "precision": ["x"], "injections": '
        '[{"kind": "k", "first_step": "x", "last_step": 1e400}, 7, {"first_step": NaN}]}')
    (seed(d, 0, 0) / "summary.json").write_text(json.dumps({
        "status": 5, "diverged_step": "soon", "spikes": {"events": [
            {"onset": 1, "peak": float("nan"), "metric": "train/loss"},
            {"onset": "x", "peak": 2**64, "metric": ["?"], "recovery_steps": {}}, "e"]}}))
    (seed(d, 1, 0) / "meta.json").write_text('{"environment": "x"}')
    (seed(d, 2, 0) / "meta.json").unlink()
    (seed(d, 2, 1) / "meta.json").write_text(DEEP)
    set_attr(d, 3, "per_seed", '"x"')
    set_attr(d, 4, "per_seed", '[1, "a", null, {"seed": "x"}, {"seed": 0, "n_events": "x"}]')
    set_attr(d, 5, "spikes", '"x"')
    set_attr(d, 5, "convergence", "1" + "0" * 400)
    set_attr(d, 5, "diverged_seeds", "NaN")
    set_attr(d, 7, "arm", "5")
    set_attr(d, 7, "overrides", "[1]")
    set_attr(d, 7, "dir", '"a\\u0000b"')
    set_attr(d, 8, "per_seed", '[{"seed": 0, "n_events": NaN, "status": 5, '
                               '"diverged_step": "x", "final_val_loss": Infinity}]')
    return [
        (0, "seed-0/metrics.jsonl: 7 lines skipped (first: line 3: not UTF-8 text)"),
        (0, 'seed-1/summary.json: spikes = "x" is not a table'),
        (0, "seed-2/summary.json: not valid JSON"),
        (0, "seed-3/summary.json: not a JSON object (a list)"),
        (0, "seed-3/meta.json: not UTF-8 text"),
        (0, "seed-0/meta.json: corpus = 5 is not a table"),
        (0, 'seed-0/meta.json: injections[0].first_step = "x" is not'),
        (0, "seed-0/meta.json: injections[0].last_step = inf is not"),
        (0, "seed-0/summary.json: status = 5 is not a string"),
        (0, "seed-0/summary.json: spikes.events[0].peak = nan is not a step"),
        (0, "seed-0/summary.json: spikes.events[1].peak = 18446744073709551616 is not a step"),
        (1, 'seed-0/meta.json: environment = "x" is not a table'),
        (2, "seed-1/meta.json: not valid JSON (nested too deeply)"),
        (3, 'user attribute per_seed = "x" is not a list'),
        (4, "user attribute per_seed[0] = 1 is not a table"),
        (4, "user attribute per_seed: 2 more problems"),
        (5, 'user attribute spikes = "x" is not a finite number'),
        (5, "user attribute convergence = 1000000000000000000000000000000000000..."),
        (5, "user attribute diverged_seeds = nan is not a finite number"),
        (7, "user attribute arm = 5 is not a string"),
        (7, "user attribute overrides = [1] is not a table"),
        (8, "user attribute per_seed[0].n_events = nan is not a finite number"),
        (8, 'user attribute per_seed[0].diverged_step = "x" is not'),
    ]


def test_a_report_of_a_damaged_sweep_is_written_and_names_each_damage(base, tmp_path):
    d = tmp_path / "damaged"
    shutil.copytree(base, d)
    expected = _damage_everything(d)
    out = tmp_path / "reports"
    assert main(["report", str(d), "--out", str(out)]) == 0
    md = (out / "damaged" / "report.md").read_text()
    # The report lists each damage where a reader of the trials table sees it.
    assert 'trial 3: user attribute per_seed = "x" is not a list' in md
    assert 'trial 0: seed-1/summary.json: spikes = "x" is not a table' in md
    assert (out / "damaged" / "report.html").is_file() and (out / "damaged" / "curves.png").is_file()
    assert "Every trial" in md
    study = load_study(d)
    report_info(study)  # the report's reads: seed files note their damage when read
    for number, text in expected:
        assert any(line.startswith(f"trial {number}: ") and text in line
                   for line in study.damaged), (number, text, study.damaged)
    assert study.trials[6].damaged == [] and all("\n" not in line for line in study.damaged)
    # What the sections read has the shapes they expect; every healthy row is kept.
    rows = seed_log(study.trials[0], 0)["rows"]
    good = (seed(base, 0, 0) / "metrics.jsonl").read_text().splitlines()
    assert [r["step"] for r in rows] == [json.loads(line)["step"] for line in good]
    assert study.metas[1] == {}  # its one key, environment = "x", dropped
    assert study.metas[2] == json.loads((seed(d, 2, 2) / "meta.json").read_text())
    assert study.trials[3].per_seed == [] and study.trials[7].arm == "search"
    assert [s.get("seed") for s in study.trials[4].per_seed] == [None, 0]  # seed "x" dropped


def test_the_fixture_study_itself_has_no_damage(base):
    study = load_study(base)
    report_info(study)
    assert study.damaged == []


SPEC_VARIANTS = [
    ("arms", 5), ("arms", []), ("arms", {"baseline": 5}), ("arms", "x"),
    ("steps", "x"), ("steps", -1), ("steps", 1.5), ("steps", True), ("steps", 2**70),
    ("seeds", "x"), ("seeds", 5), ("seeds", [0, "a"]), ("seeds", [0.5]),
    ("space", 5), ("space", [5]), ("space", [{"key": 5, "high": 1}]),
    ("space", [{"key": "a", "low": "x", "high": 1}]), ("space", [{"key": "a", "choices": 5}]),
    ("space", [{"key": "a", "high": 1, "log": "yes"}]),
    ("base", 5), ("base", []), ("objective", 5), ("objective", "both"),
    ("spike_metric", "loud"), ("target_loss", "x"), ("target_loss", math.nan),
    ("spike_limit", []), ("notes", 5), ("path", 5), ("name", []), ("eval_every", "x"),
    ("trials", -3), ("sampler", 5), ("pruner", {}), ("storage", 5), ("default_recipe", "yes"),
]


@pytest.fixture(scope="module")
def spec_db(base):
    return base / "study.db", stored_spec(base)


@pytest.mark.parametrize("key,value", SPEC_VARIANTS)
def test_a_spec_field_of_the_wrong_type_is_an_unreadable_spec(spec_db, tmp_path, key, value):
    db, spec = spec_db
    (tmp_path / "s").mkdir()
    shutil.copyfile(db, tmp_path / "s" / "study.db")
    set_spec(tmp_path / "s", json.dumps({**spec, key: value}))
    study = load_study(tmp_path / "s")
    assert study.spec is None and study.spec_problem.startswith(f"spec.{key}")
    assert study.arms == {} and study.steps == 0 and study.seeds == []
    text = report_text(study)
    assert "sweep definition cannot be read (spec." + key in text


@pytest.mark.parametrize("spec_json", ['"x"', "5", "[1]", '{"arms": 5}'])
def test_a_spec_that_is_not_a_table_or_lacks_fields_is_unreadable(spec_db, tmp_path, spec_json):
    db, _ = spec_db
    (tmp_path / "s").mkdir()
    shutil.copyfile(db, tmp_path / "s" / "study.db")
    set_spec(tmp_path / "s", spec_json)
    study = load_study(tmp_path / "s")
    assert study.spec is None and study.spec_problem
    assert "cannot be read" in report_text(study)


ATTR_VARIANTS = [
    ("per_seed", '"x"'), ("per_seed", "5"), ("per_seed", "{}"), ("per_seed", "[1, 2]"),
    ("per_seed", "[null]"), ("per_seed", '[{"seed": "x"}]'), ("per_seed", '[{"seed": 1.5}]'),
    ("per_seed", '[{"seed": Infinity}]'), ("per_seed", '[{"seed": 0, "n_events": "x"}]'),
    ("per_seed", '[{"seed": 0, "n_events": NaN}]'), ("per_seed", '[{"seed": 0, "status": []}]'),
    ("per_seed", '[{"seed": 0, "status": "diverged", "diverged_step": "x", "seconds": 5}]'),
    ("per_seed", '[{"seed": 0, "steps_to_target": {}, "status": "completed"}]'),
    ("per_seed", '[{"seed": 0, "final_val_loss": ' + "9" * 400 + "}]"),
    ("spikes", '"x"'), ("spikes", "1" + "0" * 400), ("convergence", "[1]"),
    ("diverged_seeds", '"x"'), ("seeds", '"x"'), ("seeds", "NaN"), ("reached_seeds", '"3"'),
    ("n_events_median", "{}"), ("arm", "5"), ("arm", "null"), ("overrides", '"x"'),
    ("overrides", "[1]"), ("dir", "5"),
]


@pytest.mark.parametrize("key,value_json", ATTR_VARIANTS)
def test_a_trial_attribute_of_the_wrong_type_is_dropped_and_noted(spec_db, tmp_path, key,
                                                                 value_json):
    db, _ = spec_db
    (tmp_path / "s").mkdir()
    shutil.copyfile(db, tmp_path / "s" / "study.db")
    set_attr(tmp_path / "s", 0, key, value_json)
    study = load_study(tmp_path / "s")
    report_text(study)
    if value_json != "null":
        assert any(line.startswith(f"trial 0: user attribute {key}") for line in
                   study.damaged), study.damaged


@pytest.mark.parametrize("recorded", ["x" * 5000, "a\u0000b"])
def test_a_recorded_dir_no_file_system_accepts_is_no_folder(spec_db, tmp_path, recorded):
    db, _ = spec_db
    (tmp_path / "s").mkdir()
    shutil.copyfile(db, tmp_path / "s" / "study.db")  # no trials/ here: the recorded dir counts
    set_attr(tmp_path / "s", 0, "dir", json.dumps(recorded))
    assert load_study(tmp_path / "s").trials[0].folder is None


def test_a_seed_folder_with_a_non_ascii_digit_is_not_a_seed(base, tmp_path):
    d = tmp_path / "d"
    shutil.copytree(base, d)
    (d / "trials" / "00000" / "seed-²").mkdir()
    study = load_study(d)
    report_text(study)
    assert study.damaged == []


# Any JSON value, including the ones a json.dumps of Python floats writes (NaN, Infinity),
# integers past a float's range and deep-ish nesting.
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                max_size=3),
    max_leaves=6)


def _table(keys, values=JSON):
    return st.dictionaries(st.sampled_from(keys), values, max_size=len(keys))


EVENT = _table(["onset", "peak", "metric", "recovery_steps", "recovered", "injected"])
SUMMARY = _table(["status", "diverged_step", "spikes"],
                 JSON | _table(["events"], JSON | st.lists(EVENT | JSON, max_size=3)))
INJECTION = _table(["kind", "target", "first_step", "last_step"])
META = _table(["environment", "corpus", "injections", "precision"],
              JSON | st.lists(INJECTION | JSON, max_size=3))
ROW = _table(["step", "train/loss", "val/loss"])
PER_SEED_ENTRY = _table(["seed", "status", "diverged_step", "n_events", "events_per_1k",
                         "steps_to_target", "seconds_to_target", "final_val_loss", "seconds"])
ATTRS = _table(["per_seed", "spikes", "convergence", "n_events_median", "diverged_seeds",
                "reached_seeds", "seeds", "arm", "overrides", "error"],
               JSON | st.lists(PER_SEED_ENTRY | JSON, max_size=3))


@pytest.fixture(scope="module")
def prop_dir(base, tmp_path_factory):
    d = tmp_path_factory.mktemp("prop") / "p"
    shutil.copytree(base, d)
    return d


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(summary=SUMMARY, meta=META, rows=st.lists(ROW | JSON, max_size=4), attrs=ATTRS)
def test_any_json_in_any_place_gives_a_report_and_notes_only_trial_0(base, prop_dir, summary,
                                                                     meta, rows, attrs):
    shutil.copyfile(base / "study.db", prop_dir / "study.db")
    for name, extra in (("summary.json", summary), ("meta.json", meta)):
        good = json.loads((seed(base, 0, 0) / name).read_text())
        (seed(prop_dir, 0, 0) / name).write_text(json.dumps({**good, **extra}))
    good = (seed(base, 0, 0) / "metrics.jsonl").read_text()
    (seed(prop_dir, 0, 0) / "metrics.jsonl").write_text(
        good + "".join(json.dumps(r) + "\n" for r in rows))
    for key, value in attrs.items():
        set_attr(prop_dir, 0, key, json.dumps(value))
    study = load_study(prop_dir)
    report_text(study)
    assert all(line.startswith("trial 0: ") for line in study.damaged)


def test_trial_json_is_fitted_too(base, tmp_path):
    d = tmp_path / "d"
    shutil.copytree(base, d)
    job = d / "trials" / "00000" / "trial.json"
    job.write_text(json.dumps({**json.loads(job.read_text()),
                               "config": {"spikes": "x", "optim": {"lr": 1}}}))
    (d / "trials" / "00001" / "trial.json").write_text('{"config": {"spikes": {"gap": -1}}')
    study = load_study(d)
    assert trial_job(study.trials[0])["config"] == {"optim": {"lr": 1}}
    assert trial_job(study.trials[1]) is None
    assert trial_job(study.trials[2])["config"]["spikes"] == {"detector": "default", "gap": 5}
    assert study.damaged == ['trial 0: trial.json: config.spikes = "x" is not a table',
                             "trial 1: trial.json: not valid JSON (Expecting ',' delimiter)"]
