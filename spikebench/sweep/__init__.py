"""Sweeps: the sweep file and its spec, Optuna studies and storages, the local driver, the
shared-storage worker, one trial's run and scoring, and the dry-run plan.

Nothing is imported here, so the trial runner (``python -m spikebench.sweep.runner``) starts
without loading Optuna.
"""
