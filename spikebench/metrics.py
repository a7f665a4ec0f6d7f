"""Metric names: the keys of a run's per-step records, in one place (OLMo-core's style).

The trainer writes them, the spike monitor, scores, sinks and report read them; a typo in
one module would silently read nothing, so every module imports the name from here.
"""

STEP = "step"
TRAIN_LOSS = "train/loss"
VAL_LOSS = "val/loss"
GRAD_NORM = "optim/grad_norm"  # pre-clip global norm
LR = "optim/lr"
LOSS_SCALE = "optim/loss_scale"  # 1 unless fp16 with scaling
SKIPPED_STEPS = "optim/skipped_steps"  # fp16 overflow steps the scaler skipped, cumulative
SKIPPED_UPDATE = "optim/skipped_update"  # 1 where skip-step skipped this step's update
CLIP_BOUND = "optim/clip_bound"  # ZClip's bound on the grad norm at this step
# With rollback: the position in the LR schedule (steps logged are steps worked, redone
# ones included), and 1 on the step at which a rollback was decided.
POSITION = "train/position"
ROLLBACK = "response/rollback"
TOKENS = "data/tokens"  # cumulative training tokens
SEQ_LEN = "data/seq_len"
# Set (1) on steps whose batch carried an injected fault.
INJECTED = "data/injected"
TOKENS_PER_S = "perf/tokens_per_s"
STEP_S = "perf/step_s"  # seconds per step, as a trainer of its own may log it
ELAPSED_S = "time/elapsed_s"  # training seconds so far, evaluation excluded
# For live monitoring: on every record, the loss-spike events the online monitor has
# opened so far; on the last record of each read-back, the process's memory.
SPIKE_EVENTS = "spikes/loss_events"
# Loss spikes told so far at their first sure row (provisional, later confirmed or
# withdrawn: spikebench.spikes.reports), and the provisional ones withdrawn so far.
SPIKE_REPORTED = "spikes/loss_reported"
SPIKE_WITHDRAWN = "spikes/loss_withdrawn"
MEM_RSS = "mem/rss_bytes"
CUDA_ALLOCATED = "mem/cuda_allocated_bytes"
CUDA_RESERVED = "mem/cuda_reserved_bytes"
# Values that differ between identical runs (wall time, memory): left out when two runs'
# logs are compared.
VOLATILE = (TOKENS_PER_S, ELAPSED_S, MEM_RSS, CUDA_ALLOCATED, CUDA_RESERVED)
UPDATE_RATIO = "probe/update_ratio"
UPDATE_NORM = "probe/update_norm"  # global norm of the applied update
# Adam's state before the step (spikebench.train.optim.adam_probes): mean g^2/(v_hat+eps^2),
# and the share of coordinates whose sqrt(v_hat) is within 10x of eps.
ADAM_G2V = "probe/adam_g2v"
ADAM_EPS_SHARE = "probe/adam_eps_share"
LOG_Z = "probe/log_z"
ATTN_LOGIT_MAX = "probe/attn_logit_max/"  # + layer index
# With a warning rule (spikebench.precursors.rule): on every record, the warnings it gave
# so far; on the records that fed it, its score (the robust z-score of its signal).
WARNINGS = "spikes/warnings"
WARNING_SCORE = "spikes/warning_score"
