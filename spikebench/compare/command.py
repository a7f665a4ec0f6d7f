"""The ``spikebench compare`` command: read the runs under each path, compare the groups,
write the study and its report (:func:`spikebench.compare.plan`, then
:func:`~spikebench.compare.write`).

:func:`run_compare` is what :mod:`spikebench.cli` dispatches to.
"""

from __future__ import annotations

import argparse
import sys

from spikebench.errors import UserError


def run_compare(args: argparse.Namespace) -> int:
    """``spikebench compare PATH...`` as the command line parsed it: read every path's runs,
    plan the comparison, write its study and report, say where; the exit code."""
    from spikebench.compare import plan, write
    from spikebench.compare.paths import check_inputs, check_out
    from spikebench.runs.discover import discover

    # Before any reading: paths that overlap, an output among the inputs.
    check_inputs(args.paths)
    check_out(args.out, args.name, args.paths)
    sources, skipped, notes = {}, [], []
    for path in args.paths:
        found = discover(path, step=args.step, metric=args.metric, grad_metric=args.grad_metric)
        sources[path] = found.runs
        skipped += found.skipped
        notes += [f"{path}: {run.name}: {run.note}" for run in found.runs if run.note]
    chosen = plan(sources, out=args.out, groups=args.group, by=args.by,
                  baseline=args.baseline, recipe=args.recipe, target_loss=args.target_loss,
                  max_step=args.max_step, unpaired=args.unpaired, detector=args.detector,
                  gap=args.gap, name=args.name, skipped=skipped)
    try:
        paths = write(chosen, args.out)
    except OSError as e:
        raise UserError(f"--out {args.out}: cannot write the comparison "
                        f"({e.strerror or e})") from None
    # What was not read, and how a run was read where that needed a choice (repeated
    # steps, a resumed TensorBoard run): a group's size and values never change unsaid. The
    # report names the same (the skipped in its header, a run's note in its row); a
    # refusal above stays one line.
    for line in skipped:
        print(f"spikebench compare: note: skipped {line}", file=sys.stderr)
    for line in notes:
        print(f"spikebench compare: note: {line}", file=sys.stderr)
    n = sum(len(runs) for runs in chosen.groups.values())
    print(f"{n} runs in {len(chosen.groups)} groups, baseline {chosen.baseline}; study: "
          f"{paths['study']}")
    print(f"report: {paths['markdown']} and {paths['html']}")
    return 0
