import subprocess
import sys

import pytest


@pytest.mark.parametrize("args, fragment", [
    (["sweep", "--jobs", "x"], "argument --jobs: 'x': must be an integer >= 0"),
    (["nope"], "invalid choice: 'nope'"),
    (["train", "--bogus"], "unrecognized arguments: --bogus"),
    (["worker", "--study", "s"], "--storage: missing; give the study's storage URL or set "
                                 "SPIKEBENCH_STORAGE"),
    (["train", "missing.toml"], "config file 'missing.toml': not found"),
    (["sweep", "missing.toml"], "sweep file 'missing.toml': not found"),
    # --dry-run refuses what the run would refuse before reading any data.
    (["train", "--dry-run", "--set", "model.cls=nope.mod:X"],
     "model.cls = 'nope.mod:X': cannot import"),
    (["train", "--dry-run", "--set", "data.corpus=/no/such/corpus"],
     "data.corpus = '/no/such/corpus': no such file or folder"),
])
def test_usage_errors_are_one_line(args, fragment):
    out = subprocess.run([sys.executable, "-m", "spikebench", *args], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and fragment in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""
