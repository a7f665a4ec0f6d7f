"""The run configuration's typed schema: one dataclass per concern, ranges in field metadata.

Every field's allowed range sits beside its default (``_rng``), so :mod:`.build` refuses a
bad value with the same bounds the code was written for.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from spikebench.errors import UserError

BYTE_VOCAB = 256  # text corpora are read as bytes


def _rng(lo: float | None = None, hi: float | None = None, *, lo_open=False, hi_open=False):
    return {"range": (lo, hi, lo_open, hi_open)}


@dataclass
class ModelConfig:
    preset: str = "gpt-tiny"
    # `package.module:Class`; the class is built as Class(model_config) and its forward
    # takes (idx, targets) and returns (logits, loss).
    cls: str = "spikebench.model:GPT"
    n_layer: int = field(default=2, metadata=_rng(1))
    n_head: int = field(default=2, metadata=_rng(1))
    n_embd: int = field(default=64, metadata=_rng(1))
    block_size: int = field(default=128, metadata=_rng(2))
    vocab_size: int = field(default=256, metadata=_rng(2))
    dropout: float = field(default=0.0, metadata=_rng(0.0, 1.0, hi_open=True))
    bias: bool = False
    qk_norm: bool = False
    # Coefficient of the output log-partition penalty z_loss * mean(logsumexp(logits)**2).
    z_loss: float = field(default=0.0, metadata=_rng(0.0))
    init: Literal["normal", "depth_scaled"] = "normal"
    init_std: float = field(default=0.02, metadata=_rng(0.0, lo_open=True))

    def check(self) -> None:
        if self.n_embd % self.n_head:
            raise UserError(
                f"model.n_embd = {self.n_embd}: must be divisible by model.n_head = {self.n_head}"
            )


@dataclass
class DataConfig:
    # "stdlib" (the embedded corpus), a text/.jsonl file or folder, or a nanoGPT .bin memmap.
    corpus: str = "stdlib"
    text_field: str = "text"
    # Cap on the bytes read from a text corpus (the stdlib is ~30 MB; a few MB is plenty).
    max_bytes: int = field(default=4_000_000, metadata=_rng(1024, 2**40))
    val_fraction: float = field(default=0.05, metadata=_rng(0.0, 0.5, lo_open=True))
    seq_len: int = field(default=128, metadata=_rng(2))
    batch_size: int = field(default=16, metadata=_rng(1))
    # random: each window at a uniform offset; sequential: step t reads the t-th stretch of
    # batch_size x seq_len bytes of the training split, in order (wrapping), as a pass over
    # ordered shards does, so a bad stretch of the corpus is met at one time.
    order: Literal["random", "sequential"] = "random"


@dataclass
class OptimConfig:
    lr: float = field(default=3e-3, metadata=_rng(0.0, lo_open=True))
    beta1: float = field(default=0.9, metadata=_rng(0.0, 1.0, hi_open=True))
    beta2: float = field(default=0.95, metadata=_rng(0.0, 1.0, hi_open=True))
    eps: float = field(default=1e-8, metadata=_rng(0.0, lo_open=True))
    weight_decay: float = field(default=0.1, metadata=_rng(0.0))
    wd_embeddings: bool = False
    wd_norms: bool = False
    # Global-norm clipping threshold; None ("off" in TOML / --set) disables it.
    clip: float | None = field(default=None, metadata=_rng(0.0, lo_open=True))
    # zclip (Kumar et al. 2025): clip the grad norm to mean + zclip_z * sd of its EMA (decay
    # zclip_alpha) once zclip_warmup steps have set the statistics; with optim.clip too, the
    # lower of the two bounds holds.
    clip_mode: Literal["fixed", "zclip"] = "fixed"
    zclip_alpha: float = field(default=0.97, metadata=_rng(0.0, 1.0, lo_open=True, hi_open=True))
    zclip_z: float = field(default=2.5, metadata=_rng(0.0, lo_open=True))
    zclip_warmup: int = field(default=25, metadata=_rng(1))
    grad_accum: int = field(default=1, metadata=_rng(1))


@dataclass
class ScheduleConfig:
    kind: Literal["cosine", "linear", "constant"] = "cosine"
    warmup_ratio: float = field(default=0.0, metadata=_rng(0.0, 1.0))
    min_lr_ratio: float = field(default=0.1, metadata=_rng(0.0, 1.0))


@dataclass
class PrecisionConfig:
    # fp16 uses dynamic loss scaling; fp16_noscale shows why that is needed.
    mode: Literal["fp32", "bf16", "fp16", "fp16_noscale"] = "fp32"
    # auto: real autocast on CUDA; on CPU real autocast where the CPU has the format natively
    # and it measured faster (once per machine), else emulated rounding (real half matmuls
    # are many times slower than fp32 on CPUs without it; benchmarks/precision_speed.py).
    impl: Literal["auto", "real", "emulated"] = "auto"
    # fp16's loss scale: below 2^-24 it underflows to 0, above 2^64 it overflows in a step.
    init_scale: float = field(default=2.0**16, metadata=_rng(2.0**-24, 2.0**64))
    # Emulated attention: "kernel" rounds the softmax probabilities as flash kernels do;
    # "io" rounds only its inputs and output (cheaper, and more precise than the real thing).
    emulated_attention: Literal["kernel", "io"] = "kernel"


@dataclass
class CurriculumConfig:
    # seqlen: sequence-length warmup (Li et al. 2022); easy_first: low-entropy windows first.
    kind: Literal["off", "seqlen", "easy_first", "both"] = "off"
    # Fraction of the steps over which the curriculum ramps to the full data.
    ratio: float = field(default=0.25, metadata=_rng(0.0, 1.0, lo_open=True))
    seqlen_start: int = field(default=16, metadata=_rng(2))
    # easy_first draws pool_factor x batch candidate windows and keeps the easiest.
    pool_factor: int = field(default=4, metadata=_rng(1))


@dataclass
class FaultConfig:
    # A burst of bad data in the batch stream ("stream") or planted in the corpus ("corpus").
    burst: Literal["none", "random_bytes", "repeat", "domain"] = "none"
    target: Literal["stream", "corpus"] = "stream"
    at: float = field(default=0.5, metadata=_rng(0.0, 1.0))
    length: int = field(default=20, metadata=_rng(1))
    rows: float = field(default=1.0, metadata=_rng(0.0, 1.0, lo_open=True))
    # corpus target: share of the training corpus replaced by contamination segments.
    corpus_share: float = field(default=0.02, metadata=_rng(0.0, 0.5, lo_open=True))
    segment_bytes: int = field(default=2048, metadata=_rng(16))
    # corpus target: "spread" places the segments uniformly; "block" puts them end to end
    # where data.order = "sequential" reads at fraction `at` of the run (a bad shard).
    corpus_layout: Literal["spread", "block"] = "spread"
    # Text of the "domain" burst; empty: generated numeric tables.
    domain_corpus: str = ""
    # Multiply the LR by lr_shock_factor for lr_shock_steps steps from fraction lr_shock_at.
    lr_shock_at: float | None = field(default=None, metadata=_rng(0.0, 1.0))
    lr_shock_factor: float = field(default=10.0, metadata=_rng(0.0, lo_open=True))
    lr_shock_steps: int = field(default=10, metadata=_rng(1))


@dataclass
class CleanConfig:
    # Cleaning of the training split, after any planted contamination (spikebench.data.clean):
    # units of at most unit_bytes (documents cut at line ends) are removed whole.
    dedup: bool = False  # MinHash LSH near-duplicates (datasketch), word 5-gram shingles
    dedup_threshold: float = field(default=0.8, metadata=_rng(0.0, 1.0, lo_open=True))
    dedup_num_perm: int = field(default=128, metadata=_rng(16, 1024))
    quality: bool = False  # the rules below; a rule with its threshold "off" is skipped
    max_garbled: float | None = field(default=0.1, metadata=_rng(0.0, 1.0, lo_open=True))
    max_symbol_word_ratio: float | None = field(default=0.1, metadata=_rng(0.0, lo_open=True))
    max_dup_line_frac: float | None = field(default=0.3, metadata=_rng(0.0, 1.0, lo_open=True))
    max_ngram_repeats: int | None = field(default=32, metadata=_rng(2))
    unit_bytes: int = field(default=1024, metadata=_rng(64, 1 << 20))
    # Mixture balance: no domain keeps more than this share of the cleaned split (None:
    # off). A domain is a top-level folder of the corpus (files at its root: "."), or with
    # domain_field set, that string field of each .jsonl document.
    max_domain_share: float | None = field(default=None, metadata=_rng(0.0, 1.0, lo_open=True))
    domain_field: str = ""
    # Results of cleaning a corpus with given settings are kept here, by content hash ("":
    # no cache). "auto": in the run's output folder, `.clean-cache/` beside the run folder
    # (`run.out_dir/.clean-cache`; a sweep's trial folder), never outside it.
    cache_dir: str = "auto"


@dataclass
class ResponseConfig:
    # What the run does about a spike: nothing; roll back to a recent good state and skip
    # batches (PaLM); or skip the update of an outlier step on the device (OLMo-core).
    kind: Literal["off", "rollback", "skip_step"] = "off"
    # rollback: the rule that triggers it, on the training loss: "zscore" is the article's
    # mean + 3 sd, "olmo_online" OLMo-core's 6 sd over 128 steps.
    detector: Literal["default", "zscore", "olmo_online"] = "default"
    every: int = field(default=10, metadata=_rng(1))  # a good state kept every N steps
    ring: int = field(default=4, metadata=_rng(1))  # how many are kept
    storage: Literal["memory", "disk"] = "memory"  # disk: in the checkpoint format
    skip_batches: int = field(default=20, metadata=_rng(0))
    lr_factor: float = field(default=1.0, metadata=_rng(0.0, 1.0, lo_open=True))
    cooldown: int = field(default=0, metadata=_rng(0))  # steps at lr_factor after a rollback
    max_rollbacks: int = field(default=3, metadata=_rng(1))
    # skip_step: skip when the loss or grad norm is above mean + skip_k * sd of the last
    # skip_window updates (the device keeps the window; no host sync).
    skip_window: int = field(default=128, metadata=_rng(2))
    skip_k: float = field(default=6.0, metadata=_rng(0.0, lo_open=True))


@dataclass
class WarningConfig:
    # An early warning of a spike (docs/monitoring.md#early-warning): the rule of
    # spikebench.precursors.rule on a logged signal, fed at each read-back; "" (the
    # default): no rule. A key ending in /* reads the max over its per-layer keys.
    signal: str = ""
    window: int = field(default=32, metadata=_rng(4))
    threshold: float = 6.0
    transform: Literal["log", "none"] = "log"
    scale: Literal["noise", "spread"] = "noise"
    min_sigma: float = field(default=0.01, metadata=_rng(0.0, lo_open=True))
    warmup: int = field(default=0, metadata=_rng(0))
    two_sided: bool = False
    # What the run does on a warning: record it only ("log"), or also scale the LR by
    # lr_factor for the next lr_steps steps ("lower_lr"; a warning inside them extends them).
    response: Literal["log", "lower_lr"] = "log"
    lr_factor: float = field(default=0.5, metadata=_rng(0.0, 1.0, lo_open=True, hi_open=True))
    lr_steps: int = field(default=50, metadata=_rng(1))

    def rule(self) -> dict[str, Any]:
        """The rule's fields (spikebench.precursors.rule.WarningRule's), for building it."""
        d = dataclasses.asdict(self)
        return {k: d[k] for k in ("signal", "window", "threshold", "transform", "scale",
                                  "min_sigma", "warmup", "two_sided")}


@dataclass
class TrainConfig:
    steps: int = field(default=300, metadata=_rng(1))
    # A budget in tokens instead of steps: steps = ceil(tokens / (batch_size * seq_len)),
    # worked out when the config is resolved (a seq-len curriculum then sees fewer tokens).
    tokens: int | None = field(default=None, metadata=_rng(1))
    seed: int = field(default=0, metadata=_rng(0))
    device: str = "auto"
    # torch intra-op threads; 0 leaves torch's default.
    threads: int = field(default=0, metadata=_rng(0, 4096))
    eval_every: int = field(default=50, metadata=_rng(1))
    eval_batches: int = field(default=4, metadata=_rng(1))
    # Metrics stay on the device and are read back once per log_every steps.
    log_every: int = field(default=10, metadata=_rng(1))
    # Instability precursors (attention logits, log Z, update/weight ratio) every N steps.
    probe_every: int = field(default=25, metadata=_rng(1))
    # An exact checkpoint every N steps and one at the end (0: none); the newest K are kept.
    checkpoint_every: int = field(default=0, metadata=_rng(0))
    keep_checkpoints: int = field(default=2, metadata=_rng(1))
    progress: bool = True
    # Data-parallel processes per run (DDP: gloo on CPU, nccl on GPU); under torchrun, its
    # world size. Each rank trains its share of the same global batch of data.batch_size.
    nproc: int = field(default=1, metadata=_rng(1, 1024))
    # A collective that waits longer than this (a rank hung or gone) fails the run.
    dist_timeout_s: float = field(default=300.0, metadata=_rng(0.0, lo_open=True))
    # torch.compile the model for the training steps (evaluation stays eager); "auto": on
    # on CUDA where torch can compile there (Triton installed), off on the CPU. The compile
    # time is kept off the training clock and reported as the summary's compile_s.
    compile: bool | Literal["auto"] = "auto"


@dataclass
class SpikeConfig:
    # The rule the in-loop monitor and the scores use (see spikebench.spikes.rules.RULES).
    detector: Literal["default", "zscore", "olmo", "olmo_online", "loss_ratio", "persistent"] = (
        "default")
    # Flagged steps with at most `gap` unflagged log rows between them form one event.
    gap: int = field(default=5, metadata=_rng(0))
    # Validation loss for time-to-target (AlgoPerf: first evaluation at or below it); None: off.
    target_loss: float | None = field(default=None, metadata=_rng(0.0, lo_open=True))


@dataclass
class RunConfig:
    out_dir: str = "results/runs"
    name: str = ""


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    faults: FaultConfig = field(default_factory=FaultConfig)
    clean: CleanConfig = field(default_factory=CleanConfig)
    response: ResponseConfig = field(default_factory=ResponseConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    spikes: SpikeConfig = field(default_factory=SpikeConfig)
    warning: WarningConfig = field(default_factory=WarningConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def check(self) -> None:
        self.model.check()
        self._check_data()
        self._check_faults()
        self._check_response()
        self._check_run()
        if self.data.seq_len > self.model.block_size:
            raise UserError(
                f"data.seq_len = {self.data.seq_len}: must be <= model.block_size = "
                f"{self.model.block_size} (the model's context)"
            )
        if self.curriculum.kind in ("seqlen", "both") and (
            self.curriculum.seqlen_start > self.data.seq_len
        ):
            raise UserError(
                f"curriculum.seqlen_start = {self.curriculum.seqlen_start}: must be <= "
                f"data.seq_len = {self.data.seq_len}"
            )
        if self.data.batch_size % self.optim.grad_accum:
            raise UserError(
                f"optim.grad_accum = {self.optim.grad_accum}: must divide data.batch_size = "
                f"{self.data.batch_size}"
            )
        if self.data.batch_size % (self.train.nproc * self.optim.grad_accum):
            raise UserError(
                f"train.nproc = {self.train.nproc}: nproc x optim.grad_accum = "
                f"{self.train.nproc * self.optim.grad_accum} must divide data.batch_size = "
                f"{self.data.batch_size} (each rank takes an equal share of every batch)")

    def _check_data(self) -> None:
        corpus = self.data.corpus
        if not corpus.strip():
            raise UserError('data.corpus = "": must be "stdlib" or a path to a .txt/.jsonl '
                            "file or folder, or a .bin")
        if not corpus.lower().endswith(".bin") and self.model.vocab_size < BYTE_VOCAB:
            raise UserError(f"model.vocab_size = {self.model.vocab_size}: must be >= "
                            f"{BYTE_VOCAB} for a byte corpus (data.corpus = {corpus!r})")

    def _check_faults(self) -> None:
        """A fault that would inject nothing, or less than it says, is refused: a run must
        never report an injection it did not make."""
        f, steps, batch = self.faults, self.train.steps, self.data.batch_size
        if f.burst != "none" and f.target == "stream":
            start = int(f.at * steps)
            if start >= steps:
                raise UserError(f"faults.at = {f.at}: the burst would start after the last "
                                f"step ({steps}); must be < 1 - 1/train.steps")
            if start + f.length > steps:
                raise UserError(f"faults.length = {f.length}: the burst from step "
                                f"{start + 1} would run past the last step ({steps}); at "
                                f"most {steps - start}")
            if math.ceil(f.rows * batch - 1e-9) < 1:
                raise UserError(f"faults.rows = {f.rows}: injects no row of a batch of {batch}; "
                                f"must be >= 1/data.batch_size = {1 / batch:g}")
        if f.lr_shock_at is not None:
            start = int(f.lr_shock_at * steps)
            if start + f.lr_shock_steps > steps:
                raise UserError(f"faults.lr_shock_at = {f.lr_shock_at}: a shock of "
                                f"{f.lr_shock_steps} steps from step {start + 1} would run past "
                                f"the last step ({steps})")

    def _check_response(self) -> None:
        r = self.response
        if r.kind == "rollback" and r.every * r.ring <= self.train.log_every:
            raise UserError(f"response.ring = {r.ring}: with response.every = {r.every} the "
                            f"ring reaches {r.every * r.ring} steps back, not past one "
                            f"read-back interval (train.log_every = {self.train.log_every}), "
                            "so no kept state could predate a detected onset; make every x "
                            "ring larger")
        w = self.warning
        if w.signal.strip("/*") == "" and (w.signal or w.response != "log"):
            raise UserError(f"warning.signal = {w.signal!r}: must name a logged metric (e.g. "
                            '"optim/grad_norm", "probe/attn_logit_max/*") for warning.response '
                            f"= {w.response!r}")
        if w.response == "lower_lr" and self.train.nproc > 1:
            raise UserError('warning.response = "lower_lr": single-process runs only (rank 0 '
                            f"reads the warning; train.nproc = {self.train.nproc} ranks would "
                            "need it broadcast)")
        if self.response.kind == "skip_step" and self.precision.mode == "fp16":
            raise UserError('response.kind = "skip_step": not with precision.mode = "fp16", '
                            "whose loss scaler decides which steps it skips; use fp32 or bf16")

    def _check_run(self) -> None:
        if not self.run.out_dir.strip():
            raise UserError(f"run.out_dir = {self.run.out_dir!r}: must name a folder (empty, "
                            "the run would be written into the working directory); e.g. "
                            '"results/runs", or "." for the working directory itself')
        name = self.run.name
        if name in (".", "..") or "/" in name or "\\" in name or len(name.encode()) > 200:
            raise UserError(f"run.name = {name[:60]!r}: must be one plain folder name (no '/', "
                            "not '.' or '..', at most 200 bytes), or empty for an automatic name")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)
