"""The configuration reference, written from the code so that it cannot drift from it.

``docs/configuration.md`` lists every key of :class:`~spikebench.config.schema.Config`, its
default and its allowed range, read from the dataclasses and their field metadata; the
description is the comment beside the field in ``schema.py`` (else :data:`NOTES`).
:mod:`spikebench.doc_pages` writes it with the other generated pages
(``python -m spikebench.doc_pages``, which ``make docs`` runs).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import math
import re
import tokenize
import types
import typing
from pathlib import Path
from typing import Any, Literal

from spikebench.config.schema import Config

DOCS = Path(__file__).resolve().parents[2] / "docs"
CONFIG_PAGE = "configuration.md"
GENERATOR = "python -m spikebench.doc_pages"  # writes every generated page

_PREAMBLE = f"""\
# Configuration reference

Every key of a run's configuration, with its default and the values it accepts. A key is
set in a TOML config file (`[optim]` then `lr = 3e-3`), in a sweep file's `[config]` table
(`optim.lr = 3e-3`), or on the command line (`--set optim.lr=3e-3`). Values resolve as:
these defaults < the model preset (`models/<name>.toml`, named by `model.preset`) < the
config file < `--set`. A `--set` value parses as a TOML literal (`--set optim.clip=off`,
`--set precision.mode=bf16`).

A key whose range ends in `or "off"` takes `"off"` (also `"none"` or `"null"`) to switch it
off. Unknown keys, wrong types, values outside their range and the checks across keys
listed on [One trial](training.md#bad-input) are refused before anything runs, in one line
with exit code 2. In a range, `[` and `]` include the bound, `(` and `)` exclude it.

> **Generated** from `spikebench/config/schema.py` (its defaults, field metadata and
> comments) by `{GENERATOR}`, which `make docs` runs;
> do not edit it by hand. `tests/test_docs.py` fails when it differs from what the code
> writes.
"""


# --- the configuration reference ---------------------------------------------------------


def _number(x: float) -> str:
    """A bound as a reader writes it: 2^40 rather than 1099511627776, 1e-8 not 1e-08."""
    if x != 0 and math.isfinite(x):
        exp = math.log2(abs(x))
        if exp == int(exp) and abs(exp) >= 20:
            return ("-" if x < 0 else "") + f"2^{int(exp)}"
    if isinstance(x, int) or float(x).is_integer():
        return str(int(x))
    return re.sub(r"e([+-])0*(\d)", r"e\1\2", f"{x:g}").replace("e+", "e")


def _default(value: Any) -> str:
    """A default as it is written in TOML."""
    if value is None:
        return '`"off"`'
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**20:
        return f"`{int(value)}.0`"
    if isinstance(value, int | float):
        return f"`{_number(value)}`"
    return f"`{value!r}`"


def _allowed(tp: Any, meta: dict) -> str:
    origin = typing.get_origin(tp)
    optional = False
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        optional = len(args) < len(typing.get_args(tp))
        if len(args) > 1:  # several kinds: true, false or "auto"
            text = ", ".join(_allowed(a, meta) for a in args)
            return text + (' or `"off"`' if optional else "")
        tp = args[0]
        origin = typing.get_origin(tp)
    if origin is Literal:
        text = ", ".join(f'`"{a}"`' for a in typing.get_args(tp))
    elif tp is bool:
        text = "`true`, `false`"
    elif tp is str:
        text = "a string"
    else:
        kind = "an integer" if tp is int else "a number"
        if "range" in meta:
            lo, hi, lo_open, hi_open = meta["range"]
            if hi is None and lo is not None:
                text = f"{kind} {'>' if lo_open else '≥'} {_number(lo)}"
            elif lo is None and hi is not None:
                text = f"{kind} {'<' if hi_open else '≤'} {_number(hi)}"
            else:
                left, right = ("(" if lo_open else "["), (")" if hi_open else "]")
                lo_s = "-inf" if lo is None else _number(lo)
                hi_s = "inf" if hi is None else _number(hi)
                text = f"{kind} in {left}{lo_s}, {hi_s}{right}"
        else:
            text = kind
    return text + (' or `"off"`' if optional else "")


def _comments(cls: type) -> tuple[str, dict[str, str]]:
    """The section's note and each field's description, from the class's source: the
    comment lines just above a field and the comment at the end of its line(s). Above a
    first field that has a comment of its own, the lines introduce the section."""
    source = "".join(inspect.getsourcelines(cls)[0])
    comments: dict[int, str] = {}  # line (1-based, in `source`) -> comment text
    code_lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
        elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                              tokenize.DEDENT, tokenize.ENDMARKER):
            code_lines.update(range(tok.start[0], tok.end[0] + 1))
    fields = [node for node in ast.parse(source).body[0].body
              if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)]
    note, out = "", {}
    for i, node in enumerate(fields):
        above: list[str] = []
        line = node.lineno - 1
        while line in comments and line not in code_lines:
            above.insert(0, comments[line])
            line -= 1
        beside = [comments[n] for n in range(node.lineno, node.end_lineno + 1)
                  if n in comments]
        if i == 0 and above and beside:
            note, above = _cell(" ".join(above)), []
        out[node.target.id] = _cell(" ".join(above + beside))
    return note, out


# What a key means where schema.py has no comment beside it (a comment there wins).
# tests/test_docs.py checks that every key named here exists.
NOTES = {
    "model.preset": "the model preset, `models/<name>.toml`: `gpt-tiny` (CPU default, "
                    "0.1M parameters), `gpt-small` (10.7M), `gpt-125m` (GPT-2 small shape)",
    "model.n_layer": "transformer blocks",
    "model.n_head": "attention heads; must divide `model.n_embd`",
    "model.n_embd": "width of the residual stream",
    "model.block_size": "the model's context in tokens; `data.seq_len` must not exceed it",
    "model.vocab_size": "vocabulary size: at least 256 for a byte corpus; a `.bin` corpus's "
                        "tokenizer's otherwise",
    "model.dropout": "dropout probability",
    "model.bias": "biases in the linear layers and layer norms",
    "model.qk_norm": "layer norm on queries and keys (qk-layernorm)",
    "model.init": "weight init: `normal`, or `depth_scaled` (GPT-2's 1/sqrt(2 x n_layer) on "
                  "the projections that write into the residual stream)",
    "model.init_std": "standard deviation of the normal init",
    "data.text_field": "the field of a `.jsonl` document that holds its text",
    "data.val_fraction": "the last share of the tokens, held out for validation",
    "data.seq_len": "bytes (tokens) per training window",
    "data.batch_size": "windows per step: the global batch, shared by the ranks when "
                       "`train.nproc` > 1",
    "optim.lr": "peak learning rate (AdamW)",
    "optim.beta1": "AdamW's beta1",
    "optim.beta2": "AdamW's beta2",
    "optim.eps": "AdamW's epsilon",
    "optim.weight_decay": "decoupled weight decay, on matrices (embeddings, norms and biases "
                          "opt in below)",
    "optim.wd_embeddings": "weight decay on the embeddings too",
    "optim.wd_norms": "weight decay on norms and biases too",
    "optim.zclip_alpha": "ZClip: decay of the grad norm's EMA",
    "optim.zclip_z": "ZClip: the bound is mean + this many standard deviations",
    "optim.zclip_warmup": "ZClip: steps that set its statistics before it clips",
    "optim.grad_accum": "micro-batches per step (the same windows, split); must divide "
                        "`data.batch_size`",
    "schedule.kind": "the LR decay after warmup, from `optim.lr` to `min_lr_ratio` of it at "
                     "the last step",
    "schedule.warmup_ratio": "linear warmup over this share of the steps",
    "schedule.min_lr_ratio": "the LR at the last step, as a share of `optim.lr`",
    "curriculum.seqlen_start": "seq-len curriculum: the first sequence length; at most "
                               "`data.seq_len`",
    "faults.target": "where a burst goes: into the batches (`stream`) or into the training "
                     "text (`corpus`)",
    "faults.at": "fraction of the run at which a stream burst starts (a corpus block: where "
                 "a sequential reader meets it)",
    "faults.length": "stream burst: its steps",
    "faults.rows": "stream burst: share of each batch's rows it replaces",
    "faults.segment_bytes": "corpus target: bytes per contamination segment",
    "faults.lr_shock_factor": "LR shock: the factor",
    "faults.lr_shock_steps": "LR shock: its steps",
    "clean.dedup_threshold": "MinHash: Jaccard similarity from which units are near "
                             "duplicates",
    "clean.dedup_num_perm": "MinHash: permutations per signature",
    "clean.max_garbled": "quality: the largest share of bytes that are neither printable "
                         "ASCII, whitespace nor valid UTF-8",
    "clean.max_symbol_word_ratio": "quality: the most `#` and `...` per word (Gopher)",
    "clean.max_dup_line_frac": "quality: the largest share of lines repeating an earlier "
                               "one (Gopher)",
    "clean.max_ngram_repeats": "quality: a word n-gram (n <= 13) repeated this many times in "
                               "a row removes its unit (Dolma)",
    "clean.unit_bytes": "a cleaner removes whole units: documents cut at line ends into "
                        "pieces of at most this many bytes",
    "clean.domain_field": "a `.jsonl` string field naming each document's domain (empty: "
                          "the corpus's top-level folder)",
    "response.skip_batches": "rollback: batches the stream skips after it",
    "response.lr_factor": "rollback: the LR's scale for `response.cooldown` steps after it",
    "response.max_rollbacks": "rollback: at most this many per run",
    "response.skip_k": "skip_step: how many standard deviations above the mean",
    "warning.window": "the trailing values the signal is judged against (values fed: steps, "
                      "or probe intervals for a probe)",
    "warning.threshold": "the robust z-score above which it warns",
    "warning.transform": "`log`: judge the signal's log (a doubling counts the same at any "
                         "level)",
    "warning.scale": "sigma from the MAD of step-to-step differences (`noise`: a steady "
                     "drift scores high) or of the values (`spread`)",
    "warning.min_sigma": "a floor on sigma, in transformed units",
    "warning.warmup": "values after the first full window that never warn",
    "warning.two_sided": "a fall warns as well as a rise",
    "warning.lr_factor": "lower_lr: the LR's scale after a warning",
    "warning.lr_steps": "lower_lr: steps at the lowered LR after a warning",
    "train.steps": "the run's length in steps (or set `train.tokens`)",
    "train.seed": "derives every random stream: init, dropout, data order, faults",
    "train.device": "`auto`, `cpu`, `cuda` or an existing `cuda:N`",
    "train.eval_every": "steps between validation evaluations (step 0 is evaluated too)",
    "train.eval_batches": "validation batches per evaluation (fixed, evenly spaced windows)",
    "train.keep_checkpoints": "the newest this many checkpoints are kept",
    "train.progress": "show a progress bar",
    "run.out_dir": "where run folders go (`<out_dir>/<run-id>/`)",
    "run.name": "the run folder's name: one plain folder name, or empty for an automatic one",
}


def _cell(text: str) -> str:
    """Text for a Markdown table cell: outside `code`, the characters Markdown or HTML
    would read (|, <, >, *, _) escaped."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code span
        parts = [text.replace("`", "\\`")]
    return "`".join(p if i % 2 else re.sub(r"([|*_])", r"\\\1", p)
                    .replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts))


def config_reference() -> str:
    """The configuration reference page, as Markdown."""
    parts = [_PREAMBLE]
    for section in dataclasses.fields(Config):
        cls = typing.get_type_hints(Config)[section.name]
        hints = typing.get_type_hints(cls)
        note, notes = _comments(cls)
        parts.append(f"\n## {section.name}\n\n" + (f"{note}\n\n" if note else "")
                     + "| key | default | allowed | description |\n|---|---|---|---|\n")
        for f in dataclasses.fields(cls):
            key = f"{section.name}.{f.name}"
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            text = notes.get(f.name) or _cell(NOTES.get(key, ""))
            parts.append(f"| `{key}` | {_default(default)} | "
                         f"{_allowed(hints[f.name], dict(f.metadata))} | {text} |\n")
    return "".join(parts)
