"""spikebench inside a training framework: callbacks over the run API (:mod:`spikebench.api`).

- :mod:`spikebench.integrations.hf`: ``SpikebenchCallback``, a Hugging Face
  ``transformers.TrainerCallback`` (``pip install 'spikebench[hf]'``);
- :mod:`spikebench.integrations.lightning`: ``SpikebenchCallback``, a Lightning
  ``lightning.pytorch.Callback`` (``pip install 'spikebench[lightning]'``);
- :mod:`spikebench.integrations.loop`: ``SpikebenchLoop``, the same for a hand-written loop.

Each logs loss, grad norm, LR and validation loss to the run folder (and the Prometheus
endpoint, when the run has one), stops the framework when the sweep prunes the trial or the
loss diverges, keeps the run's detector state in the framework's checkpoints, and finishes
the run when training ends. A spike is logged only: nothing in training changes. Importing
this package imports no framework; each module imports its own.
"""
