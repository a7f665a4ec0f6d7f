"""A study: its layout on disk and in its Optuna storage, and the records a trial leaves
there, so that a report needs either the results folder or the storage URL alone."""

from spikebench.study.layout import StudyLayout

__all__ = ["StudyLayout"]
