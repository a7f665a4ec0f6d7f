"""The "across sizes" section on a study whose comparison grid crosses model.preset: every
arm at three sizes, 6 seeds, outcomes set per arm, size and seed (fixtures.make_study: a
real Optuna storage and trial folders as a sweep writes them)."""

import html

import numpy as np
import pytest
import torch
from fixtures import make_study, outcome

from spikebench import config as cfgmod
from spikebench.model import GPT
from spikebench.report import exact, kendall
from spikebench.report.data import load_study
from spikebench.report.html import render_html
from spikebench.report.markdown import render_markdown
from spikebench.report.model_size import gpt_params
from spikebench.report.sections import across_sizes as A
from spikebench.report.sections import headings, report_info

SIZES = ["gpt-tiny", "gpt-mini", "gpt-4m"]
STRATEGIES = {"baseline": {}, "clip 1.0": {"optim.clip": 1.0},
              "qk-layernorm": {"model.qk_norm": True},
              "warmup 5%": {"schedule.warmup_ratio": 0.05},
              "z-loss 1e-4": {"model.z_loss": 1e-4}}
# Spike events per seed: the same order of the arms at every size (baseline most).
EVENTS = {"baseline": 6, "warmup 5%": 4, "clip 1.0": 3, "qk-layernorm": 1, "z-loss 1e-4": 2}
# Final loss: warmup helps at the two small sizes and hurts at the largest.
FINAL = {"baseline": 3.5, "clip 1.0": 3.3, "qk-layernorm": 3.0, "z-loss 1e-4": 3.4}


def _strategy(values):
    for name, changes in STRATEGIES.items():
        if changes and all(values.get(k) == v for k, v in changes.items()):
            return name
    return "baseline"


def _outcome(arm, values, seed):
    name, size = _strategy(values), values["model.preset"]
    final = (3.2 if size != "gpt-4m" else 3.8) if name == "warmup 5%" else FINAL[name]
    return outcome(events=EVENTS[name] + seed % 2 * (name == "baseline"),
                   reached_at=None if name == "baseline" else 50 + 5 * seed,
                   seconds=None if name == "baseline" else 5.0,
                   final=final + 0.01 * seed * (2 if name == "baseline" else 1))


@pytest.fixture(scope="module")
def sized(tmp_path_factory):
    arms = {}
    for name, changes in STRATEGIES.items():
        for size in SIZES:
            if name == "z-loss 1e-4" and size == "gpt-4m":
                continue  # a strategy the largest size never ran
            label = name if size == "gpt-tiny" else f"{name} @ model.preset={size}"
            arms[label] = {**changes, "model.preset": size}
    root = tmp_path_factory.mktemp("sizes")
    return load_study(make_study(root, folder="sizes", arms=arms, space=[], baseline={},
                                 search=0, seeds=range(6), grid={"model.preset": SIZES},
                                 outcome_of=_outcome))


@pytest.fixture(scope="module")
def info(sized):
    return A.info(sized)


def _row(info, label):
    return next(r for r in info.rows if r["label"] == label)


def test_sizes_are_ordered_by_parameters_counted_as_torch_counts_them(info):
    assert [s["values"]["model.preset"] for s in info.sizes] == SIZES
    for s in info.sizes:
        cfg = cfgmod.resolve({"model": {"preset": s["values"]["model.preset"]}})
        with torch.device("meta"):
            assert s["params"] == sum(p.numel() for p in GPT(cfg.model).parameters())
    assert info.sizes[-1]["params"] / info.sizes[0]["params"] >= 30


@pytest.mark.parametrize("qk_norm,bias", [(True, False), (True, True), (False, True)])
def test_the_shape_count_matches_torch_with_biases_and_qk_norm(qk_norm, bias):
    cfg = cfgmod.resolve({"model": {"preset": "gpt-mini", "qk_norm": qk_norm, "bias": bias}})
    with torch.device("meta"):
        assert gpt_params(cfg.model) == sum(p.numel() for p in GPT(cfg.model).parameters())


def test_a_strategy_better_at_every_size_transfers(info):
    clip = _row(info, "clip 1.0")
    assert clip["transfer"]["verdict"] == A.TRANSFERS
    for c in clip["cells"]:
        for key, _ in A.MEASURES:
            assert c[key]["verdict"] == A.BETTER and c[key]["hi"] < 0 <= c[key]["p"] < 0.05


def test_a_flipped_strategy_changes_with_size(info):
    warm = _row(info, "warmup 5%")
    assert [c["final_loss"]["verdict"] for c in warm["cells"]] == [A.BETTER, A.BETTER, A.WORSE]
    assert warm["transfer"]["verdict"] == A.CHANGES
    assert warm["transfer"]["measures"]["final_loss"]["verdict"] == A.CHANGES
    assert warm["transfer"]["measures"]["spikes"]["verdict"] == A.TRANSFERS


def test_a_strategy_missing_at_one_size_is_not_tested(info):
    z = _row(info, "z-loss 1e-4")
    assert z["transfer"]["verdict"] == A.NOT_TESTED
    assert "gpt-4m" in z["transfer"]["why"]


def test_tau_is_one_for_identical_rankings_and_less_for_a_flip(info):
    taus = {(t["size"].split(" ")[0], t["measure"]): t for t in info.taus}
    assert len(taus) == 2 * len(A.MEASURES)
    for size in ("gpt-tiny", "gpt-mini"):
        t = taus[(size, "Spike events / 1k steps")]
        assert t["value"] == pytest.approx(1.0) and t["n"] == 4 and t["seeds"] == 6
        assert t["p"] == pytest.approx(1 / 24)  # one of the 4! orders is as concordant
        f = taus[(size, "Final val loss")]
        assert f["value"] < 1 and f["p"] > t["p"]
    for t in info.taus:
        if t["value"] is not None and t["lo"] is not None:
            assert -1 <= t["lo"] <= t["value"] <= t["hi"] <= 1


def test_kendall_reversed_is_minus_one_and_bootstrap_stays_within_bounds():
    x = np.arange(5.0)
    assert kendall.tau_b(x, -x)[0] == pytest.approx(-1.0)
    rng = np.random.default_rng(1)
    small, large = rng.normal(size=(6, 5)), rng.normal(size=(6, 5))
    t = kendall.agreement(small, large, n_boot=300)
    assert -1 <= t.lo <= t.hi <= 1 and 0 < t.p <= 1


def test_verdicts_are_read_off_the_printed_interval():
    def iv(lo, hi):
        return exact.Interval(0.0, lo, hi, 6, "exact sign-flip interval")
    assert A.read(iv(-2.0, -0.1)) == A.BETTER
    assert A.read(iv(0.1, 2.0)) == A.WORSE
    assert A.read(iv(-1.0, 0.0)) == A.NO_DIFF  # closed ends: 0 is held
    assert A.read(iv(None, None)) == A.NOT_TESTED


def test_the_section_is_in_both_reports_only_with_a_size_dimension(sized, study):
    report = report_info(sized)
    md, page = render_markdown(report), render_html(report)
    title = dict(headings(report))["across_sizes"]
    assert f"## {title}" in md and f'<h2 id="across_sizes">{html.escape(title)}</h2>' in page
    assert "changes with size" in md and "Kendall" in page
    plain = report_info(study)
    assert not plain["across_sizes"].available
    assert "across_sizes" not in dict(headings(plain))
    assert "Across model sizes" not in render_markdown(plain)


def _cells(**per_measure):
    """Cells at three sizes: each measure's verdict per size as given, else no difference."""
    none = [A.NO_DIFF] * 3
    return [{"status": "complete", **{key: {"verdict": per_measure.get(key, none)[i]}
                                      for key, _ in A.MEASURES}}
            for i in range(3)]


def test_no_difference_at_every_size_is_no_effect_not_a_transfer():
    labels = ["s", "m", "l"]
    got = A._get_transfer_info(_cells(), labels)
    assert got["verdict"] == A.NO_EFFECT
    assert got["measures"]["final_loss"]["verdict"] == A.NO_EFFECT
    # One measure better at every size, the others with no change shown: that one transfers.
    got = A._get_transfer_info(_cells(steps_to_target=[A.BETTER] * 3), labels)
    assert got["verdict"] == A.TRANSFERS
    # No change at two sizes and worse at the largest: the effect changes with size.
    got = A._get_transfer_info(_cells(steps_to_target=[A.NO_DIFF, A.NO_DIFF, A.WORSE]),
                               labels)
    assert got["verdict"] == A.CHANGES


def test_the_spike_area_is_compared_where_the_event_counts_tie():
    """One start-up event in every run: the count has no interval, the area still does."""
    labels = ["s", "m", "l"]
    got = A._get_transfer_info(_cells(spikes=[A.NOT_TESTED] * 3,
                                      severity=[A.BETTER] * 3), labels)
    assert got["measures"]["severity"]["verdict"] == A.TRANSFERS
    assert got["measures"]["spikes"]["verdict"] == A.NOT_TESTED
    assert got["verdict"] == A.TRANSFERS
