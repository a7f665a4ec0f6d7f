"""Mutation check: each named mutation of the package must make its tests fail.

Every mutation is a one-place edit that breaks something users trust the harness for
(clipping, the applied LR, causal attention, the report's numbers...). The script copies the
repository to a temporary folder, applies one mutation there, runs the tests that guard it
and reports whether they caught it. It exits 1 if any mutation survives, so a test weakened
later fails CI. Run it with ``make mutations`` or
``.venv/bin/python tests/mutations.py [--only NAME ...] [--list]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", "results", "reports", "__pycache__",
                                     ".pytest_cache", ".ruff_cache", "*.egg-info")


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str  # relative to the repository root
    old: str  # must occur exactly once in the file
    new: str
    tests: tuple[str, ...]  # pytest node ids or files that must catch it


LOOP = "tests/train/test_loop.py"
RENDERED = "tests/report/test_report_rendered.py"
DIST = "tests/train/test_dist.py"
MUTATIONS = (
    Mutation("clipping is a no-op", "spikebench/train/loop.py",
             "clip_grad_norm_(params, clip, foreach=True)",
             "clip_grad_norm_(params, math.inf, foreach=True)",
             (f"{LOOP}::test_clipping_bounds_the_applied_gradient_and_logs_the_preclip_norm",)),
    Mutation("the LR schedule is logged but never applied", "spikebench/train/loop.py",
             'group["lr"] = lr', 'group["lr"] = group["lr"]',
             (f"{LOOP}::test_applied_lr_is_the_logged_lr_under_warmup_decay_and_shock",)),
    Mutation("the LR shock is ignored", "spikebench/train/schedule.py",
             "cfg.faults.lr_shock_factor if at in shocked else 1.0", "1.0",
             (f"{LOOP}::test_applied_lr_is_the_logged_lr_under_warmup_decay_and_shock",)),
    Mutation("weight decay on every parameter", "spikebench/train/optim.py",
             "(decay if wants else no_decay).append(p)", "decay.append(p)",
             ("tests/train/test_optim.py",)),
    Mutation("attention is not causal", "spikebench/model.py",
             "dropout_p=drop, is_causal=True)", "dropout_p=drop, is_causal=False)",
             ("tests/test_model.py::test_attention_is_causal",)),
    Mutation("qk-norm built but not applied", "spikebench/model.py",
             "q, k = self.q_norm(q), self.k_norm(k)", "q, k = q, k",
             ("tests/test_model.py::test_qk_norm_is_applied_in_forward",)),
    Mutation("the output head is not tied to the embedding", "spikebench/model.py",
             "logits = F.linear(x, self.wte.weight)", "logits = F.linear(x, self.wte.weight.detach().clone())",
             ("tests/test_model.py::test_tied_embeddings_and_parameter_count",)),
    Mutation("micro-batch losses are not averaged", "spikebench/train/loop.py",
             "loss = loss / grad_accum", "loss = loss",
             (f"{LOOP}::test_grad_accum_matches_full_batch",)),
    Mutation("emulated bf16 rounds nothing", "spikebench/emulation.py",
             "            return x if self._is_half(x) else round_to(x, self.dtype)\n",
             "            return x\n",
             (f"{LOOP}::test_emulated_half_precision_in_the_real_loop",)),
    Mutation("a half result changed in place is not rounded again", "spikebench/emulation.py",
             "version is not None and version == x._version", "version is not None",
             ("tests/test_precision.py::"
              "test_a_half_result_is_not_rounded_again_until_it_changes_in_place",)),
    Mutation("a trial's score is the mean over seeds", "spikebench/scoring/trial.py",
             "if n_div else statistics.median(conv))", "if n_div else statistics.mean(conv))",
             ("tests/scoring/test_trial_scores.py",)),
    Mutation("the default detector at one scale fires on noise",
             "spikebench/spikes/default_rule.py", "k: float = 5.5,", "k: float = 2.0,",
             ("tests/spikes/test_rules.py",)),
    Mutation("the loss's multi-step evidence takes noise for spikes",
             "spikebench/spikes/evidence.py", "k_peak: float = 5.72", "k_peak: float = 3.0",
             ("tests/spikes/test_rules.py::test_zscore_false_alarms_on_plain_noise",
              "tests/spikes/test_synthetic.py::test_default_detector_precision_recall_false_alarms")),
    Mutation("a run that never comes back is flagged", "spikebench/spikes/evidence.py",
             "                if self._decaying(zs):", "                if True:",
             ("tests/spikes/test_rules_multi.py",)),
    Mutation("a diverged seed hidden by the median", "spikebench/scoring/trial.py",
             '"spikes": float((1 + share) * worst if n_div else statistics.median(spikes)),',
             '"spikes": float(statistics.median(spikes)),',
             ("tests/scoring/test_trial_ordering.py",)),
    Mutation("supported through the interval's far end, not its end nearest no change",
             "spikebench/report/verdicts.py",
             "        return SUPPORTED if near >= c else",
             "        return SUPPORTED if far >= c else",
             ("tests/report/test_report_verdicts.py",)),
    Mutation("the recipe's misses left closed, flattering it", "spikebench/report/verdicts.py",
             "    open_lo, open_hi = base_missed > 0, recipe_missed > 0",
             "    open_lo, open_hi = base_missed > 0, False",
             ("tests/report/test_report_verdicts.py",)),
    Mutation("LR sensitivity without the initial-loss cap", "spikebench/scoring/lr.py",
             "return min(float(final), float(initial)) if finite(final) else float(initial)",
             "return float(final) if finite(final) else float(initial)",
             ("tests/scoring/test_lr_scores.py",
              "tests/report/sections/test_report_lr_sensitivity.py")),
    Mutation("the LR grid merges every setting into one curve", "spikebench/report/lr_grid.py",
             "key = tuple((k, f[k]) for k in varying)", "key = ()",
             ("tests/report/test_report_lr_grid.py",
              "tests/report/sections/test_report_lr_sensitivity.py")),
    Mutation("a resumed run forgets the RNG state", "spikebench/train/state.py",
             'torch.set_rng_state(state["rng"]["cpu"])', "pass",
             ("tests/train/test_checkpoint.py::test_killed_run_resumes_bit_identical",)),
    Mutation("a resumed run keeps the killed run's extra log rows", "spikebench/train/sinks.py",
             "os.truncate(self.partial, resume_at)", "pass",
             ("tests/train/test_checkpoint.py::test_killed_run_resumes_bit_identical",)),
    Mutation("a corrupted checkpoint is loaded anyway", "spikebench/train/checkpoint.py",
             'return "checksum mismatch (truncated or corrupted)"', 'return ""',
             ("tests/train/test_checkpoint.py::"
              "test_a_corrupted_checkpoint_is_named_and_the_previous_one_used",)),
    Mutation("skip-step decides to skip but the update is applied", "spikebench/train/loop.py",
             "opt.grad_scale, opt.found_inf = None, skip.float()",
             "opt.grad_scale, opt.found_inf = None, bad.float()",
             ("tests/train/test_response.py::"
              "test_skip_step_leaves_weights_and_optimizer_state_untouched",)),
    Mutation("ZClip computes its bound but never clips", "spikebench/train/zclip.py",
             "torch._foreach_mul_(grads, coef)", "grads = grads",
             ("tests/train/test_response.py::test_zclip_bound_holds_at_every_applied_update",)),
    Mutation("a crashed trial is retried on every rerun", "spikebench/sweep/studies.py",
             "or (t.state == TrialState.FAIL and t.number not in retried)", "or False",
             ("tests/sweep/test_driver.py::"
              "test_a_crashing_trial_is_recorded_as_failed_and_not_retried_forever",)),
    Mutation("the claims' Baseline and Recipe columns swapped",
             "spikebench/report/sections/claims.py",
             'Cell(fmt(r["baseline"])), Cell(fmt(r["recipe"])),',
             'Cell(fmt(r["recipe"])), Cell(fmt(r["baseline"])),', (RENDERED,)),
    Mutation("CI bounds printed reversed", "spikebench/report/blocks.py",
             "[{fmt(lo)}, {fmt(hi)}]", "[{fmt(hi)}, {fmt(lo)}]",
             (RENDERED,)),
    Mutation("percentage signs flipped", "spikebench/report/blocks.py",
             'text = f"{100 * x:.0f}%"', 'text = f"{-100 * x:.0f}%"', (RENDERED,)),
    Mutation("every verdict printed as supported", "spikebench/report/sections/claims.py",
             '"verdict": v.verdict,', '"verdict": "supported",', (RENDERED,)),
    Mutation("the bench's exact loss check never finds a difference",
             "spikebench/bench/compare.py", "            if x != y and not (",
             "            if False and not (", ("tests/bench/test_compare.py",)),
    Mutation("live metrics never count a spike event", "spikebench/live/exporter.py",
             "            if new > 0:", "            if False:",
             ("tests/live/test_exporter.py",)),
    Mutation("a warning's lowered LR is never applied", "spikebench/train/loop.py",
             "lr *= a.lr_factor(step)", "lr *= 1.0",
             ("tests/responses/test_warning_response.py::"
              "test_the_loop_lowers_the_lr_after_a_warning_and_a_resume_does_the_same",)),
    Mutation("the bench judges a regression without the minimum effect",
             "spikebench/bench/compare.py", 'worse <= level and effect >= min_effect',
             "worse <= level", ("tests/bench/test_compare.py",)),
    Mutation("data-parallel ranks log their own loss, not the global mean",
             "spikebench/train/loop.py", "    dist.mean_(loss_sum)  # on the device",
             "    # on the device", (f"{DIST}::test_two_gloo_ranks_match_one_process_with_the"
                                     "_same_global_batch",)),
    Mutation("compare writes its report into an input folder", "spikebench/compare/paths.py",
             "        if _within(where, folder):", "        if False:",
             ("tests/compare/test_compare_inputs.py",)),
    Mutation("the precursors' control is scored as spikes a signal should foresee",
             "spikebench/precursors/labels.py",
             "(control if _caused(steps, table, int(e[\"onset\"])) else onsets)", "onsets",
             ("tests/precursors/test_scorecard.py::test_the_control_has_no_lead",)),
    Mutation("a precursor's threshold ignores the false-alarm budget",
             "spikebench/precursors/scorecard.py",
             "if sum(_false_alarms(r, cand[mid]) for r in runs) <= allowed:", "if True:",
             ("tests/precursors/test_scorecard.py::"
              "test_a_planted_precursor_leads_and_beats_the_loss",)),
    Mutation("no difference at every size is called a transfer",
             "spikebench/report/sections/across_sizes.py",
             "elif set(verdicts) == {NO_DIFF}:", "elif False:",
             ("tests/report/test_across_sizes.py::"
              "test_no_difference_at_every_size_is_no_effect_not_a_transfer",)),
)


def _copy(m: Mutation | None, tmp: Path) -> Path:
    """The repository copied to ``tmp`` with mutation ``m`` applied (None: as it is)."""
    copy = tmp / "repo"
    shutil.copytree(ROOT, copy, ignore=COPY_IGNORE)
    if m is not None:
        target = copy / m.path
        text = target.read_text()
        if text.count(m.old) != 1:
            raise SystemExit(f"mutation {m.name!r}: {m.old!r} occurs {text.count(m.old)} "
                             f"times in {m.path}, expected once (update tests/mutations.py)")
        target.write_text(text.replace(m.old, m.new))
    return copy


def _child(copy: Path, tests: tuple[str, ...], out: Path) -> None:
    """In a forked child: pytest on ``tests`` in ``copy``, its output to ``out``; exits."""
    try:
        os.setpgid(0, 0)  # a group of its own, with the processes its tests start
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.chdir(copy)
        # The copy comes first on sys.path, ahead of the editable install, here and in the
        # processes the tests start.
        os.environ.update(PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
        sys.path.insert(0, str(copy))
        import pytest

        rc = pytest.main(["-x", "-q", "-p", "no:cacheprovider",
                          "--hypothesis-profile=mutations", *tests])
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(rc))
    except BaseException:  # noqa: BLE001 - a child must never return into the parent's loop
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os._exit(99)


def run_all(jobs: list[tuple[Mutation | None, tuple[str, ...]]], at_once: int):
    """Yield (job index, tests failed, seconds, last line of pytest's output) as each job
    ends, ``at_once`` at a time. Each job runs in a child forked from this process, which
    has imported torch (and torch._dynamo, which its optimizers import) but not spikebench:
    the child imports the mutated copy's, and no child pays torch's start-up. Nothing here
    starts a thread, so forking is safe."""
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401

    assert "spikebench" not in sys.modules, "the children must import the mutated copy"
    with tempfile.TemporaryDirectory(prefix="spikebench-mutants-") as tmp:
        queue, running = list(enumerate(jobs)), {}
        try:
            yield from _drive(queue, running, Path(tmp), at_once)
        finally:  # stopped early: no child outlives the copies it runs in
            for pid in running:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


def _drive(queue, running, tmp: Path, at_once: int):
    """Start jobs from ``queue`` while fewer than ``at_once`` run; yield each as it ends."""
    while queue or running:
        while queue and len(running) < at_once:
            index, (m, tests) = queue.pop(0)
            where = tmp / str(index)
            where.mkdir()
            copy, out = _copy(m, where), where / "pytest.out"
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(copy, tests, out)
            running[pid] = (index, out, time.perf_counter())
        pid, status = os.wait()
        index, out, t0 = running.pop(pid)
        lines = out.read_text(errors="replace").strip().splitlines()
        yield (index, os.waitstatus_to_exitcode(status) != 0, time.perf_counter() - t0,
               lines[-1] if lines else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="*", help="run only the mutations with these names")
    p.add_argument("--list", action="store_true", help="list the mutations and exit")
    p.add_argument("--unmutated-passed", action="store_true",
                   help="skip running the guarding tests on the code as it is: they just "
                        "passed (CI runs `make test` first)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="mutations tested at once, each in its own copy (default: one per core)")
    args = p.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    if args.list:
        print("\n".join(f"{m.name}: {m.path}" for m in MUTATIONS))
        return 0
    # The guarding tests must pass on the code as it is, or a failure proves nothing. That
    # run goes first; its verdict is checked before any mutation's is printed.
    every = tuple(dict.fromkeys(t for m in chosen for t in m.tests))
    jobs = [(m, m.tests) for m in chosen]
    if not args.unmutated_passed:
        jobs.insert(0, (None, every))
    results: dict[int, tuple[bool, float, str]] = {}
    survived, printed = [], 0
    for index, failed, seconds, last in run_all(jobs, max(1, args.jobs)):
        results[index] = (failed, seconds, last)
        while printed in results:  # in the order of the list, as each is known
            m, (failed, seconds, last) = jobs[printed][0], results[printed]
            printed += 1
            if m is None:
                if failed:
                    print(f"the guarding tests fail without any mutation ({last}); fix them "
                          "first")
                    return 1
                print(f"unmutated: the guarding tests pass ({seconds:.0f}s)", flush=True)
                continue
            # A test that fails, not one that errors: a copy missing something the tests
            # need would make every mutant "caught" (the unmutated run checks it fully).
            caught = failed and " failed" in f" {last}" and " error" not in last
            print(f"{'caught  ' if caught else 'SURVIVED'} {m.name} ({seconds:.0f}s: {last})",
                  flush=True)
            if not caught:
                survived.append(m.name)
    print(f"mutations: {len(chosen) - len(survived)} caught, {len(survived)} survived"
          + (f" ({', '.join(survived)})" if survived else ""))
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
