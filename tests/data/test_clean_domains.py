"""Mixture balance: domains from folders or a .jsonl field, the cap per domain, its errors."""

import json

import pytest

from spikebench import config as c
from spikebench.data.clean.domains import PLANTED, DomainMap, balance, targets, thin
from spikebench.data.clean.units import Unit, split_units
from spikebench.data.corpus import load_corpus
from spikebench.data.sources import read_text_source
from spikebench.errors import UserError


def test_targets_cut_only_the_domains_over_the_cap_to_one_size():
    assert targets({"a": 60, "b": 30, "c": 10}, 0.5) == {"a": 40, "b": 30, "c": 10}
    t = targets({"a": 60, "b": 30, "c": 10}, 0.4)  # cutting a lifts b over the cap too
    assert t == pytest.approx({"a": 20, "b": 20, "c": 10})
    assert targets({"a": 5, "b": 5}, 1.0) == {"a": 5, "b": 5}
    assert targets({"a": 9, "b": 3}, 0.5) == {"a": 3, "b": 3}  # cap * n == 1: all equal


def test_a_cap_no_mixture_of_so_few_domains_can_meet_is_one_line():
    with pytest.raises(UserError) as e:
        targets({"a": 10, "b": 10, "empty": 0}, 0.4)
    msg = str(e.value)
    assert "\n" not in msg and "clean.max_domain_share = 0.4" in msg and "2 domains" in msg
    assert ">= 0.5" in msg


def test_thin_keeps_the_target_spread_over_the_whole_domain():
    units = [Unit(10 * i, 10 * i + 10) for i in range(100)]
    drop = set(thin(units, 300))
    kept = [i for i, u in enumerate(units) if u not in drop]
    assert len(kept) == 30
    assert max(b - a for a, b in zip(kept, kept[1:], strict=False)) <= 4  # no long gap
    assert kept[-1] >= 96  # the domain's end is kept too, not only its head
    assert thin(units, 1000) == []


def test_overlay_relabels_planted_ranges_and_keeps_what_follows():
    dm = DomainMap((0, 100), ("a", "b")).overlay([{"start": 50, "end": 150}], PLANTED)
    assert dm.starts == (0, 50, 150) and dm.labels == ("a", PLANTED, "b")
    assert [dm.at(p) for p in (0, 49, 50, 149, 150, 999)] == ["a", "a", PLANTED, PLANTED,
                                                             "b", "b"]


def test_balance_leaves_no_domain_over_the_cap():
    data = b"".join(b"line of text %d\n" % i for i in range(4000))
    units = split_units(data, 100)
    third = len(data) // 3
    dm = DomainMap((0, 2 * third, 2 * third + third // 2), ("big", "mid", "small"))
    drop = set(balance(units, dm, 0.4))
    kept: dict[str, int] = {}
    for u in units:
        if u not in drop:
            kept[dm.of(u)] = kept.get(dm.of(u), 0) + u.end - u.start
    total = sum(kept.values())
    assert max(kept.values()) / total <= 0.4
    assert kept["small"] == sum(u.end - u.start for u in units if dm.of(u) == "small")


def _folder(tmp_path):
    root = tmp_path / "corpus"
    for name, n in (("big", 12), ("mid", 3), ("small", 2)):
        (root / name).mkdir(parents=True)
        for i in range(n):
            (root / name / f"{i}.txt").write_text("".join(
                f"{name} document {i} line {j} says something\n" for j in range(300)))
    (root / "_root.txt").write_text("a file at the root\n" * 200)
    return root


def test_folders_are_domains_and_each_document_starts_where_recorded(tmp_path):
    root = _folder(tmp_path)
    text = read_text_source(str(root), c.load(None, []), "data.corpus")
    assert [d for _, d in text.domains] == ["."] + ["big"] * 12 + ["mid"] * 3 + ["small"] * 2
    for (at, _), f in zip(text.domains, sorted(root.rglob("*.txt")), strict=True):
        assert text.data[at:].startswith(f.read_bytes()[:50])


def test_balance_caps_a_folder_corpus_and_reports_each_domain(tmp_path):
    root = _folder(tmp_path)
    cfg = c.load(None, [f"data.corpus={root}", "clean.max_domain_share=0.4",
                        f"clean.cache_dir={tmp_path / 'cache'}", "data.val_fraction=0.02"])
    r = load_corpus(cfg).meta["cleaning"]
    doms = r["domains"]
    assert set(doms) == {"big", "mid", "small", "."}
    out = sum(d["out"] for d in doms.values())
    assert out == r["bytes_out"] and max(d["out"] for d in doms.values()) / out <= 0.4
    assert doms["big"]["out"] < doms["big"]["in"] and doms["small"]["out"] == doms["small"]["in"]
    assert list(r["by_reason"]) == ["balance"]
    assert r["by_reason"]["balance"]["bytes"] == sum(d["in"] - d["out"] for d in doms.values())


def _jsonl(tmp_path, rows):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_jsonl_field_names_the_domain(tmp_path):
    rows = [{"text": f"web page {i} " * 80, "src": "web" if i % 4 else "books"}
            for i in range(200)]
    path = _jsonl(tmp_path, rows)
    cfg = c.load(None, [f"data.corpus={path}", "clean.max_domain_share=0.5",
                        "clean.domain_field=src", "clean.cache_dir="])
    doms = load_corpus(cfg).meta["cleaning"]["domains"]
    assert set(doms) == {"web", "books"}
    assert doms["web"]["out"] == pytest.approx(doms["books"]["out"], rel=0.05)


def test_a_missing_domain_field_is_one_line(tmp_path, capsys):
    from spikebench.cli import main

    path = _jsonl(tmp_path, [{"text": "a b c", "src": "x"}, {"text": "d e f", "src": "y"},
                             {"text": "no domain here"}])
    rc = main(["train", "--set", f"data.corpus={path}", "--set", "clean.max_domain_share=0.5",
               "--set", "clean.domain_field=src"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "clean.domain_field = 'src'" in err and "docs.jsonl line 3" in err


def test_a_domain_field_on_a_text_file_is_one_line(tmp_path):
    (tmp_path / "a.txt").write_text("plain text\n" * 50)
    cfg = c.load(None, [f"data.corpus={tmp_path}", "clean.max_domain_share=0.5",
                        "clean.domain_field=src"])
    with pytest.raises(UserError, match=r"clean.domain_field = 'src': a.txt is not .jsonl"):
        load_corpus(cfg)


def test_planted_domain_text_is_a_domain_of_its_own(tmp_path):
    cfg = c.load(None, ["faults.burst=domain", "faults.target=corpus",
                        "faults.corpus_share=0.3", "data.max_bytes=2000000",
                        "clean.max_domain_share=0.2", f"clean.cache_dir={tmp_path}"])
    r = load_corpus(cfg).meta["cleaning"]
    planted = r["domains"][PLANTED]
    assert planted["in"] == pytest.approx(r["planted_bytes"], rel=0.05)
    assert planted["out"] / r["bytes_out"] <= 0.2 and r["recall"] > 0.2


@pytest.mark.parametrize("over", ["clean.max_domain_share=0", "clean.max_domain_share=1.5"])
def test_a_share_outside_zero_one_is_refused(over, capsys):
    from spikebench.cli import main

    assert main(["train", "--set", over, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "clean.max_domain_share" in err


def test_a_domain_whose_target_is_under_one_unit_keeps_one():
    units = [Unit(1000 * i, 1000 * i + 1000) for i in range(100)] + [Unit(100_000, 100_300)]
    dm = DomainMap((0, 100_000), ("a", "b"))
    drop = set(balance(units, dm, 0.5))
    kept = [u for u in units if u not in drop]
    assert {dm.of(u) for u in kept} == {"a", "b"}  # no domain vanished, no error
