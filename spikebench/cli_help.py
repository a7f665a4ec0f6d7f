"""The command line's help text: each command's description and examples, by command.

:func:`spikebench.cli.build_parser` sets them on its parsers; a command missing here fails
there. Kept apart from the parsing so that cli.py stays glue.
"""

# Each command's --help: a description above its options and examples below them, shown as
# written (RawDescriptionHelpFormatter). docs/ embeds this help, tests/test_docs.py parses
# every example, and `python -m spikebench.doc_pages` rewrites the docs' copy.
COMMAND_HELP = {
    "spikebench": ("""\
Measure and tame loss spikes in LM pretraining: run trials and Optuna sweeps over
the stability strategies, score each by its loss spikes and convergence over
several seeds, and report the comparison.""", """\
examples:
  spikebench sweep sweeps/default.toml      # the main job (make sweep)
  spikebench report results/default         # its report: reports/default/report.md
  spikebench train --set optim.lr=3e-3      # one trial
  spikebench spikes results/runs/<run-id>/metrics.jsonl   # the spikes of any log

Each command has its own --help. Documentation: README.md and docs/."""),
    "train": ("""\
Train one run. The config resolves as: defaults < model preset < CONFIG < --set;
a bad key or value is refused in one line (exit 2) before anything runs. Writes
results/runs/<run-id>/: config.json, meta.json, metrics.jsonl, summary.json.""", """\
examples:
  spikebench train                                   # gpt-tiny on the stdlib corpus
  spikebench train my.toml --set optim.lr=3e-3 --set optim.clip=1.0
  spikebench train --set precision.mode=bf16 --dry-run   # print the resolved config
  spikebench train my.toml --set train.checkpoint_every=500
  spikebench train --resume results/runs/<run-id>    # from its newest checkpoint
  spikebench train my.toml --set train.nproc=8       # data-parallel, 8 ranks"""),
    "sweep": ("""\
Run (or resume) an Optuna sweep: the sweep file's designed comparison (the
baseline, each strategy alone, the recipe) first, then the sampler's search
trials, every trial over the same seeds. Writes results/<study>/ (study.db,
trials/, trials.csv); `spikebench report results/<study>` writes its report.""", """\
examples:
  spikebench sweep sweeps/default.toml --dry-run     # the resolved space and trial plan
  spikebench sweep sweeps/default.toml               # what `make sweep` runs
  spikebench sweep sweeps/default.toml --jobs 1 --set train.steps=200 --trials 10
  spikebench sweep sweeps/default.toml --metrics-port 9464
  spikebench sweep sweeps/default.toml --storage postgresql://user:pass@db/spikebench --jobs 0"""),
    "worker": ("""\
Join a study shared through PostgreSQL (created by `spikebench sweep ... --jobs 0`)
and run its trials until the study has them all. Start one per server, or per
group of train.nproc GPUs.""", """\
examples:
  spikebench worker --storage postgresql://user:pass@db/spikebench --study default"""),
    "slurm": ("""\
Start a shared study's workers through Slurm: writes a batch script whose job
array runs N `spikebench worker` tasks, each with the GPUs of one trial
(--gres=gpu:K, K = the study's train.nproc), and submits it with sbatch. The
storage URL goes to the job in its environment, not into the script. A task
stopped by its time limit or a preemption gives its trial back and is requeued.""", """\
examples:
  spikebench slurm --storage postgresql://user:pass@db/spikebench --study default --workers 8
  spikebench slurm --study default --workers 16 --parallel 4 --time 4:00:00 --partition gpu
  spikebench slurm --study default --workers 8 --script-only   # write it, submit nothing"""),
    "spikes": ("""\
Find the loss spikes in training runs: a log file (CSV, JSONL, a TensorBoard event
file, an HF trainer_state.json, a W&B export, a long-format CSV) or a folder of runs
(TensorBoard, HF output, Lightning, MLflow, spikebench runs), one line per run. The
same detector as training (`default` unless --detector names another); prints the
events and the spike scores. Where the step or loss column is ambiguous it stops
naming the candidates: --step and --metric choose.""", """\
examples:
  spikebench spikes results/runs/<run-id>/metrics.jsonl
  spikebench spikes wandb_export.csv --metric train_loss --detector olmo_online --plot spikes.png
  spikebench spikes hf_output/checkpoint-500/trainer_state.json
  spikebench spikes runs/ --target-loss 3.5     # every run below runs/, one line each
  spikebench spikes wandb_history.csv --step _step
  spikebench spikes log.jsonl --json"""),
    "precursors": ("""\
Score the signals said to warn of a loss spike before it: which signal rises first,
how many steps ahead, how often wrongly. Reads run folders, study folders or any
logs `spikebench spikes` reads, labels each run's loss events with the same
detector, and prints per signal its PR-AUC, recall at >= 10, 25 and 50 steps of lead
at <= 1 false alarm per 10k steps, the median lead, false alarms on runs without a
spike and the lead on the control (spikes an injected batch or an LR jump caused),
each with a 95% bootstrap interval over seeds, against the loss as the baseline.""", """\
examples:
  spikebench precursors results/precursors          # the labelled set (make precursors)
  spikebench precursors runs/a runs/b --json        # one JSON object
  spikebench precursors results/precursors --budget 5 --burn-in 100"""),
    "report": ("""\
Write a sweep's report from its results folder, or from its storage alone (no
folder: what each trial recorded there): OUT/<folder or study name>/report.md with
its PNG plots, and report.html, one self-contained file. Changes nothing it reads.""", """\
examples:
  spikebench report results/default                  # reports/default/report.md and .html
  spikebench report results/lr-stability --out /tmp/reports
  spikebench report --storage postgresql://user:pass@db/spikebench --study default"""),
    "compare": ("""\
Compare groups of existing runs (TensorBoard, HF Trainer, Lightning, W&B, MLflow,
CSV/JSONL, spikebench run folders): groups by glob, by a hyperparameter of each run's
own metadata, or one per PATH; each against the baseline group, paired by seed where
seeds match, else by exact two-sample tests. Writes OUT/report.md, OUT/report.html
and the comparison as a study in OUT/NAME/; reads the runs, changes nothing there.""", """\
Defaults: the baseline is the first group; the target loss the baseline's median final
loss (validation, else training); every run is cut to the shortest run's last step.

examples:
  spikebench compare runs/baseline runs/clip             # one group per folder
  spikebench compare runs/ --by optim.lr --baseline 0.001 --target-loss 3.5
  spikebench compare runs/ --group base='base-*' --group zclip='zclip-*' --recipe zclip"""),
    "bench": ("""\
Run a regression suite and compare it with its baseline: every loss bit for bit
in the same environment, exact tests in another, performance ratios. A suite
with a [trainer] table runs your own training command per seed (its losses bit
for bit only where it is deterministic). Exit 0: no regression; 1: a
regression; 2: bad input.""", """\
The default baseline is baselines/<suite name>.json beside the suites/ folder the
suite is in (benchmarks/suites/cpu.toml: benchmarks/baselines/cpu.json), else
beside the suite.

examples:
  spikebench bench                           # benchmarks/suites/cpu.toml vs its baseline
  spikebench bench --update-baseline         # record this run as the baseline
  spikebench bench --suite benchmarks/suites/gpu.toml
  spikebench bench --suite benchmarks/suites/nanogpt-csv.toml --update-baseline"""),
}
