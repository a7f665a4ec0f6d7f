import hashlib
import json
import socket
import sysconfig

import numpy as np
import pytest
import torch

from spikebench.config import load
from spikebench.data import sources as corpus_mod
from spikebench.data.corpus import load_corpus
from spikebench.data.seeds import derive_seed
from spikebench.data.sources import DOC_SEP
from spikebench.errors import UserError

torch.set_num_threads(1)

SMALL = ["data.seq_len=32", "data.batch_size=4", "data.max_bytes=50000"]


def cfg_for(corpus, *overrides):
    return load(None, [*SMALL, f"data.corpus={json.dumps(str(corpus))}", *overrides])


def joined(c) -> bytes:
    return bytes(torch.cat([c.train, c.val]).numpy())


def prose(n: int, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"spike", b"loss", b"token"]
    return b" ".join(words[i] for i in rng.integers(0, len(words), n))[:n]


# -- derive_seed ---------------------------------------------------------------------------


def test_derive_seed_is_stable_63_bit_and_name_sensitive():
    a = derive_seed(0, "data", 3)
    assert a == derive_seed(0, "data", np.int64(3))  # numpy ints name the same stream
    assert 0 <= a < 2**63
    assert len({a, derive_seed(1, "data", 3), derive_seed(0, "data", 4), derive_seed(0, "x")}) == 4
    # Pinned value: changing the derivation silently would unpair every stored result.
    digest = hashlib.sha256(repr((0, "data", 3)).encode()).digest()
    assert a == int.from_bytes(digest[:8], "big") >> 1


# -- stdlib --------------------------------------------------------------------------------


def test_stdlib_loads_offline_with_stable_hash(monkeypatch):
    def no_network(*args, **kwargs):
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket, "socket", no_network)
    cfg = load(None, SMALL)
    a, b = load_corpus(cfg), load_corpus(cfg)
    m = a.meta
    assert m["kind"] == "stdlib" and m["source"] == "stdlib" and m["n_files"] >= 1
    assert m["bytes"] <= 50000 and m["train_tokens"] + m["val_tokens"] == m["bytes"]
    assert m["sha256"] == b.meta["sha256"] == hashlib.sha256(joined(a)).hexdigest()
    assert a.train.dtype == torch.uint8 and a.vocab_size == 256
    assert m["val_tokens"] == int(m["bytes"] * cfg.data.val_fraction)
    assert m["contamination"] == []
    json.dumps(m)


def test_stdlib_walk_order_skips_and_cap(tmp_path, monkeypatch):
    files = {
        "b/c.py": b"C" * 150,
        "a.py": b"A" * 150,  # "a.py" < "b/c.py": sorted by relative POSIX path
        "test/t.py": b"T",
        "b/tests/t.py": b"T",
        "site-packages/s.py": b"S",
        "idlelib/i.py": b"I",
        "__pycache__/p.py": b"P",
        "d/notes.txt": b"N",
        "e.py": b"E" * 150,
    }
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"stdlib": str(tmp_path)})
    c = load_corpus(load(None, [*SMALL, "data.max_bytes=1024", "data.val_fraction=0.3"]))
    assert joined(c) == b"A" * 150 + DOC_SEP + b"C" * 150 + DOC_SEP + b"E" * 150
    assert c.meta["n_files"] == 3
    # The cap truncates the last file used and counts the separators.
    cap = load(None, [*SMALL, "data.max_bytes=1024", "data.seq_len=16", "data.val_fraction=0.3"])
    cap.data.max_bytes = 200  # below the config range on purpose, to hit the cut cheaply
    c = load_corpus(cap)
    assert joined(c) == b"A" * 150 + DOC_SEP + b"C" * 48 and c.meta["n_files"] == 2


# -- user text ------------------------------------------------------------------------------


def test_txt_file_split_is_contiguous_tail(tmp_path):
    data = prose(5000)
    (tmp_path / "a.txt").write_bytes(data)
    c = load_corpus(cfg_for(tmp_path / "a.txt", "data.val_fraction=0.1"))
    assert c.meta["kind"] == "text" and c.meta["n_files"] == 1 and c.meta["bytes"] == 5000
    assert bytes(c.val.numpy()) == data[-500:] and bytes(c.train.numpy()) == data[:-500]
    assert c.meta["sha256"] == hashlib.sha256(data).hexdigest()


def test_jsonl_documents_joined_custom_field(tmp_path):
    docs = [prose(800, i).decode() + " é" for i in range(4)]
    lines = [json.dumps({"body": d, "id": i}) for i, d in enumerate(docs)]
    (tmp_path / "d.jsonl").write_text("\n".join(lines[:2]) + "\n\n" + "\n".join(lines[2:]) + "\n")
    c = load_corpus(cfg_for(tmp_path / "d.jsonl", "data.text_field=body"))
    assert joined(c) == DOC_SEP.join(d.encode() for d in docs)
    assert c.meta["kind"] == "jsonl"


def test_folder_recursive_sorted_mixed(tmp_path):
    (tmp_path / "z").mkdir()
    (tmp_path / "z" / "b.txt").write_bytes(prose(1000, 1))
    (tmp_path / "a.jsonl").write_text(json.dumps({"text": prose(1000, 2).decode()}) + "\n")
    (tmp_path / "ignored.csv").write_bytes(b"1,2,3\n" * 100)
    c = load_corpus(cfg_for(tmp_path))
    assert joined(c) == prose(1000, 2) + DOC_SEP + prose(1000, 1)
    assert c.meta["n_files"] == 2 and c.meta["kind"] == "text"


def test_max_bytes_caps_text(tmp_path):
    (tmp_path / "a.txt").write_bytes(prose(5000))
    c = load_corpus(cfg_for(tmp_path / "a.txt", "data.max_bytes=2000"))
    assert joined(c) == prose(5000)[:2000]


# -- .bin ------------------------------------------------------------------------------------


def test_bin_split_and_sibling_val(tmp_path):
    tokens = (np.arange(3000) * 7 % 1000).astype(np.uint16)
    tokens.tofile(tmp_path / "data.bin")
    c = load_corpus(cfg_for(tmp_path / "data.bin", "model.vocab_size=1000"))
    assert isinstance(c.train, np.memmap) and c.train.dtype == np.uint16
    assert c.vocab_size == 1000 and c.meta["kind"] == "bin" and c.meta["n_files"] == 1
    assert np.array_equal(np.concatenate([c.train, c.val]), tokens)
    assert len(c.val) == int(3000 * 0.05)
    assert c.meta["sha256"] == hashlib.sha256(tokens.tobytes()).hexdigest()

    tokens.tofile(tmp_path / "train.bin")
    tokens[:500].tofile(tmp_path / "val.bin")
    c = load_corpus(cfg_for(tmp_path / "train.bin", "model.vocab_size=1000"))
    assert len(c.train) == 3000 and np.array_equal(c.val, tokens[:500])
    assert c.meta["n_files"] == 2 and c.meta["bytes"] == 7000
    json.dumps(c.meta)


# -- errors ------------------------------------------------------------------------------------


def _bad_inputs(tmp):
    (tmp / "empty").mkdir()
    (tmp / "empty" / "x.csv").write_text("1,2\n")
    (tmp / "empty.txt").write_bytes(b"")
    (tmp / "short.txt").write_bytes(b"x" * 100)
    (tmp / "bad.jsonl").write_text('{"text": "ok"}\n{not json\n')
    (tmp / "nofield.jsonl").write_text('{"text": "ok"}\n{"body": "x"}\n')
    (tmp / "list.jsonl").write_text('["text"]\n')
    (tmp / "odd.bin").write_bytes(b"abc")
    (tmp / "a.md").write_text("hello")
    return {
        "missing": (tmp / "nope.txt", "no such file"),
        "missing_bin": (tmp / "nope.bin", "no such file"),
        "no_usable_files": (tmp / "empty", "no .txt or .jsonl"),
        "empty_file": (tmp / "empty.txt", "empty"),
        "too_short": (tmp / "short.txt", "needs >= 66"),
        "bad_json": (tmp / "bad.jsonl", "bad.jsonl line 2 is not valid JSON"),
        "missing_field": (tmp / "nofield.jsonl", "line 2 has no string field 'text'"),
        "not_object": (tmp / "list.jsonl", "line 1 has no string field"),
        "odd_bin": (tmp / "odd.bin", "not a whole number of uint16"),
        "suffix": (tmp / "a.md", "unsupported file type '.md'"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing",
        "missing_bin",
        "no_usable_files",
        "empty_file",
        "too_short",
        "bad_json",
        "missing_field",
        "not_object",
        "odd_bin",
        "suffix",
    ],
)
def test_bad_corpus_is_one_line_config_error(tmp_path, case):
    path, fragment = _bad_inputs(tmp_path)[case]
    with pytest.raises(UserError) as e:
        load_corpus(cfg_for(path))
    msg = str(e.value)
    assert msg.startswith(f"data.corpus = {str(path)!r}:") and fragment in msg and "\n" not in msg


def test_big_bin_is_fingerprinted_not_fully_hashed(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus_mod, "FULL_HASH_LIMIT", 1000)
    np.arange(3000, dtype=np.uint16).tofile(tmp_path / "t.bin")
    a, b = (load_corpus(cfg_for(tmp_path / "t.bin", "model.vocab_size=3000")) for _ in range(2))
    assert a.meta["sha256_scope"] == "head_tail" and a.meta["sha256"] == b.meta["sha256"]


def test_bin_ids_beyond_the_vocab_are_refused_not_an_index_error(tmp_path, monkeypatch):
    from spikebench.data.batches import BatchStream

    tokens = np.full(4000, 7, dtype=np.uint16)
    tokens[1500:2500] = 999  # the middle of the train split
    tokens.tofile(tmp_path / "t.bin")
    with pytest.raises(UserError) as e:  # small: every id is checked when loaded
        load_corpus(cfg_for(tmp_path / "t.bin"))
    assert str(e.value) == (f"data.corpus = {str(tmp_path / 't.bin')!r}: holds token id 999, "
                            "but model.vocab_size = 256; set model.vocab_size > 999 (50304 "
                            "for GPT-2 ids)")
    # Big: only the first and last MiB are read when loaded; the batch that meets the bad
    # ids is refused on the host, before it could reach the embedding.
    monkeypatch.setattr(corpus_mod, "FULL_HASH_LIMIT", 1000)
    monkeypatch.setattr(corpus_mod, "_HASH_CHUNK", 2000)  # first/last 1000 ids
    cfg = cfg_for(tmp_path / "t.bin")
    stream = BatchStream(load_corpus(cfg), cfg, "cpu")
    with pytest.raises(UserError, match=r"token id 999 at step \d+ is >= model.vocab_size"):
        for step in range(20):
            stream.batch(step)
    # The same for a big val.bin beside a clean train.bin: its batches are checked too.
    np.full(4000, 7, dtype=np.uint16).tofile(tmp_path / "train.bin")
    tokens.tofile(tmp_path / "val.bin")
    cfg = cfg_for(tmp_path / "train.bin")
    stream = BatchStream(load_corpus(cfg), cfg, "cpu")
    with pytest.raises(UserError, match="token id 999 in the validation batches"):
        stream.val_batches()


def test_a_bin_too_short_for_a_split_is_a_length_error(tmp_path):
    np.arange(10, dtype=np.uint16).tofile(tmp_path / "tiny.bin")
    with pytest.raises(UserError, match="the train split has 10 tokens, needs >="):
        load_corpus(cfg_for(tmp_path / "tiny.bin"))


def test_segment_longer_than_train_refused():
    cfg = load(
        None,
        [
            *SMALL,
            "data.max_bytes=1500",
            *CONTAM,
            "faults.burst=repeat",
            "faults.segment_bytes=2048",
        ],
    )
    with pytest.raises(UserError, match=r"^faults.segment_bytes = 2048: must be <="):
        load_corpus(cfg)


def test_contamination_refused_on_bin(tmp_path):
    np.arange(2000, dtype=np.uint16).tofile(tmp_path / "t.bin")
    cfg = cfg_for(tmp_path / "t.bin", "faults.target=corpus", "faults.burst=repeat")
    with pytest.raises(UserError, match=r"^faults.target = 'corpus': .*\.bin"):
        load_corpus(cfg)


# -- contamination -------------------------------------------------------------------------------

CONTAM = ["faults.target=corpus", "faults.segment_bytes=256", "faults.corpus_share=0.05"]


@pytest.fixture(scope="module")
def clean():
    return load_corpus(load(None, SMALL))


def contaminated(burst, *extra):
    return load_corpus(load(None, [*SMALL, *CONTAM, f"faults.burst={burst}", *extra]))


def segments_and_mask(c):
    segs = c.meta["contamination"]
    mask = torch.zeros(len(c.train), dtype=torch.bool)
    for s in segs:
        mask[s["start"] : s["end"]] = True
    return segs, mask


@pytest.mark.parametrize("burst", ["random_bytes", "repeat", "domain"])
def test_contamination_positions_recorded_rest_untouched(clean, burst):
    c = contaminated(burst)
    segs, mask = segments_and_mask(c)
    n = len(clean.train)
    assert len(segs) == round(0.05 * n / 256) and all(s["kind"] == burst for s in segs)
    assert all(s["end"] - s["start"] == 256 for s in segs)
    assert all(a["end"] <= b["start"] for a, b in zip(segs, segs[1:], strict=False))
    assert 0 <= segs[0]["start"] and segs[-1]["end"] <= n
    assert torch.equal(c.train[~mask], clean.train[~mask])
    assert (c.train[mask] != clean.train[mask]).float().mean() > 0.5
    assert torch.equal(c.val, clean.val) and c.meta["sha256"] == clean.meta["sha256"]
    assert c.meta["contamination"] == contaminated(burst).meta["contamination"]  # seeded
    assert c.meta["contamination"] != contaminated(burst, "train.seed=1").meta["contamination"]


def test_contamination_contents(clean, tmp_path):
    rep = contaminated("repeat")
    docs = {bytes(rep.train[s["start"] : s["end"]].numpy()) for s in rep.meta["contamination"]}
    assert len(docs) == 1 and docs.pop() in bytes(clean.train.numpy())  # one real document

    dom = contaminated("domain")
    for s in dom.meta["contamination"]:
        assert set(bytes(dom.train[s["start"] : s["end"]].numpy())) <= set(b"0123456789.,-\n")

    text = prose(3000, 9)
    (tmp_path / "other.txt").write_bytes(text)
    own = contaminated("domain", f"faults.domain_corpus={json.dumps(str(tmp_path / 'other.txt'))}")
    for s in own.meta["contamination"]:
        assert bytes(own.train[s["start"] : s["end"]].numpy()) in text * 2

    rnd = contaminated("random_bytes")
    seg = rnd.meta["contamination"][0]
    assert len(set(bytes(rnd.train[seg["start"] : seg["end"]].numpy()))) > 100  # ~uniform
