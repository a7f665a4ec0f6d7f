"""The spike-tolerant pruner against Optuna's own, on a real study: it stops a slowly
improving, hopeless trial (PatientPruner never does) and spares a good trial through one
spike (plain Hyperband does not)."""

import warnings

import optuna
import pytest
from optuna.trial import TrialState

from spikebench.sweep.pruner import SpikeTolerantPruner, rising_for

optuna.logging.set_verbosity(optuna.logging.ERROR)
STEPS = list(range(20, 161, 20))


def _hyperband():
    return optuna.pruners.HyperbandPruner(min_resource=20, max_resource=160,
                                          reduction_factor=3)


def _good(k):
    return [5.0 - 0.25 * i - 0.01 * k for i in range(len(STEPS))]


HOPELESS = [5.6 - 0.02 * i for i in range(len(STEPS))]  # improves at every evaluation
SPIKY = _good(20)
SPIKY[2] += 2.0  # one spike at step 60, then back on the good curve


def _run(study, values):
    """Report ``values`` at STEPS; the step it was pruned at (None: it ran to the end)."""
    t = study.ask()
    for step, v in zip(STEPS, values, strict=True):
        t.report(v, step)
        if t.should_prune():
            study.tell(t, state=TrialState.PRUNED)
            return step
    study.tell(t, values[-1])
    return None


def _outcomes(pruner):
    study = optuna.create_study(study_name="prune", pruner=pruner)
    good = [_run(study, _good(k)) for k in range(9)]
    return good, _run(study, HOPELESS), _run(study, SPIKY), _run(study, HOPELESS)


def test_rising_for_counts_the_latest_values_above_the_best_before_them():
    assert rising_for([]) == rising_for([3.0]) == rising_for([5, 4, 3]) == 0
    assert rising_for([5, 4, 3, 3.5]) == 1
    assert rising_for([5, 4, 6, 7]) == 2
    assert rising_for([5, 4, 6, 3.9]) == 0  # back under: a new best


@pytest.mark.parametrize("name", ["spike_tolerant", "patient", "hyperband"])
def test_hopeless_trials_are_pruned_and_a_spike_is_survived(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        pruner = {"spike_tolerant": SpikeTolerantPruner(_hyperband(), patience=2),
                  "patient": optuna.pruners.PatientPruner(_hyperband(), patience=2),
                  "hyperband": _hyperband()}[name]
    good, hopeless, spiky, hopeless_again = _outcomes(pruner)
    assert good == [None] * 9
    if name == "spike_tolerant":
        assert hopeless is not None and hopeless_again is not None and spiky is None
    elif name == "patient":  # what the sweep used before: it never pruned
        assert hopeless is None and hopeless_again is None and spiky is None
    else:  # Hyperband alone stops the good trial at its spike
        assert hopeless is not None and spiky == 60
