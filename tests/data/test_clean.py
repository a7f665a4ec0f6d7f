"""The cleaners as pure functions: units, quality rules, MinHash dedup, removal scores."""

import random

import pytest

from spikebench.data.clean import (
    Unit,
    near_duplicates,
    quality_flags,
    removal_scores,
    split_units,
)
from spikebench.data.clean.quality import (
    dup_line_frac,
    garbled_share,
    max_consecutive_ngram,
    symbol_word_ratio,
)

DEFAULTS = {"max_garbled": 0.1, "max_symbol_word_ratio": 0.1, "max_dup_line_frac": 0.3,
            "max_ngram_repeats": 32}


def test_units_cover_every_byte_and_cut_at_line_ends():
    doc = b"".join(b"line %d of the first document\n" % i for i in range(40))
    data = doc + b"\n\n" + b"short second\n" + b"\n\n" + b"x" * 50
    units = split_units(data, 200)
    assert units[0].start == 0 and units[-1].end == len(data)
    assert all(a.end == b.start for a, b in zip(units, units[1:], strict=False))
    assert all(u.end - u.start <= 200 for u in units)
    # Inside a document a unit ends on a line end; a document ends its last unit.
    first_doc = [u for u in units if u.end <= len(doc) + 2]
    assert all(data[u.end - 1:u.end] == b"\n" for u in first_doc)
    assert any(u.text(data).strip() == b"short second" for u in units)
    assert units[-1].text(data).endswith(b"x" * 50) and b"".join(u.text(data) for u in units) == data
    assert split_units(b"y" * 450, 200) == [Unit(0, 200), Unit(200, 400), Unit(400, 450)]


def test_quality_measures():
    rng = random.Random(0)
    noise = bytes(rng.randrange(256) for _ in range(1000))
    assert garbled_share(noise) > 0.3
    assert garbled_share("naïve café – ok".encode()) == 0.0  # valid UTF-8 is text
    assert garbled_share(b"plain text\n") == 0.0
    assert symbol_word_ratio(b"# a # b ... c d") == pytest.approx(3 / 7)  # 7 tokens
    assert dup_line_frac(b"a\nb\na\na\n\n") == pytest.approx(2 / 4)
    assert max_consecutive_ngram(b"buy now " * 40 + b"end") == 40
    assert max_consecutive_ngram(b"one two three") == 1


def test_quality_flags_name_every_rule_failed_and_none_turns_a_rule_off():
    spam = b"click here " * 40
    assert quality_flags(spam, DEFAULTS) == ["ngram_repeats"]  # one line, 40 repeats
    assert quality_flags(spam, {**DEFAULTS, "max_ngram_repeats": None}) == []
    prose = b"The quick brown fox jumps over the lazy dog.\nIt was not amused.\n"
    assert quality_flags(prose, DEFAULTS) == []
    r1 = random.Random(1)
    noise = bytes(r1.randrange(256) for _ in range(800))
    assert "garbled" in quality_flags(noise, DEFAULTS)


def test_near_duplicates_keep_the_first_of_each_cluster():
    rng = random.Random(0)
    vocab = [f"w{i}".encode() for i in range(5000)]

    def doc():
        return b" ".join(rng.choice(vocab) for _ in range(200))
    a, b = doc(), doc()
    a2 = a.replace(a.split()[100], b"changed", 1)  # one word of 200 changed
    texts = [a, b, a2, a, b"", b"tiny"]
    assert near_duplicates(texts, threshold=0.8) == [None, None, 0, 0, None, None]
    assert near_duplicates([a, b], threshold=0.8) == [None, None]


def test_removal_scores_against_planted_segments():
    planted = [{"start": 100, "end": 200}, {"start": 500, "end": 600}]
    removed = [Unit(50, 150), Unit(150, 250), Unit(520, 540)]
    s = removal_scores(removed, planted)
    assert s["removed_bytes"] == 220 and s["planted_bytes"] == 200
    assert s["planted_removed_bytes"] == 100 + 20
    assert s["precision"] == pytest.approx(120 / 220) and s["recall"] == pytest.approx(120 / 200)
    assert removal_scores([], planted)["precision"] is None
    assert removal_scores(removed, [])["recall"] is None


def _load(tmp_path, *over):
    from spikebench import config as c
    from spikebench.data.corpus import load_corpus

    cfg = c.load(None, ["faults.burst=random_bytes", "faults.target=corpus",
                        "data.max_bytes=300000", f"clean.cache_dir={tmp_path / 'cache'}", *over])
    return load_corpus(cfg)


GARBLED_ONLY = ["clean.quality=true", "clean.max_symbol_word_ratio=off",
                "clean.max_dup_line_frac=off", "clean.max_ngram_repeats=off"]


def test_the_garbled_rule_finds_planted_random_bytes_and_is_cached(tmp_path):
    corpus = _load(tmp_path, *GARBLED_ONLY)
    r = corpus.meta["cleaning"]
    assert not r["from_cache"] and r["planted_bytes"] > 0
    assert r["recall"] > 0.95 and r["precision"] > 0.8
    assert list(r["by_reason"]) == ["garbled"] and r["by_reason"]["garbled"]["examples"]
    assert corpus.meta["train_tokens"] == len(corpus.train) == r["bytes_out"] < r["bytes_in"]
    again = _load(tmp_path, *GARBLED_ONLY)
    assert again.meta["cleaning"]["from_cache"]
    assert bytes(again.train.numpy()) == bytes(corpus.train.numpy())
    # Other settings are another cache entry.
    assert not _load(tmp_path, *GARBLED_ONLY, "clean.max_garbled=0.5").meta["cleaning"][
        "from_cache"]


def test_cleaning_that_leaves_nothing_is_one_line():
    from spikebench.config import CleanConfig
    from spikebench.data.clean.run import clean
    from spikebench.errors import UserError

    rng = random.Random(2)
    noise = bytes(rng.randrange(256) for _ in range(5000))
    with pytest.raises(UserError, match="removed all 5000 bytes"):
        clean(noise, CleanConfig(quality=True, cache_dir=""), [])


@pytest.mark.parametrize("over, fragment", [
    ("clean.dedup_threshold=1.5", "clean.dedup_threshold = 1.5"),
    ("clean.dedup_threshold=0", "clean.dedup_threshold = 0"),
    ("clean.max_garbled=2", "clean.max_garbled = 2"),
])
def test_a_threshold_outside_its_range_is_refused(over, fragment, capsys):
    from spikebench.cli import main

    assert main(["train", "--set", over, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err


def test_dedup_finds_a_planted_repeated_document_and_the_cap_scores_planted_domains(tmp_path):
    corpus = _load(tmp_path, "faults.burst=repeat", "faults.corpus_share=0.05",
                   "clean.dedup=true")
    r = corpus.meta["cleaning"]
    assert r["planted_bytes"] > 0 and r["recall"] > 0.6  # 7 copies: all but the first
    assert list(r["by_reason"]) == ["dedup"]
    # Planted domain text scored against the cap: a 30% planted domain is cut to the cap.
    dom = _load(tmp_path, "faults.burst=domain", "faults.corpus_share=0.3",
                "data.max_bytes=2000000", "clean.max_domain_share=0.2")
    d = dom.meta["cleaning"]
    assert d["precision"] > 0.2 and 0.2 < d["recall"] < 1  # other domains over 20% go too
