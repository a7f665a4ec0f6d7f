from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

from spikebench.train.launch import cause, describe


def _failure(rank, exitcode, at):
    f = ProcessFailure(local_rank=rank, pid=100 + rank, exitcode=exitcode, error_file="/no/file")
    f.timestamp = at
    return f


def test_the_rank_that_died_is_named_not_the_peer_stopped_after_it():
    # Rank 0 was SIGKILLed; the agent then stopped rank 1 with SIGTERM in the same second.
    failures = {1: _failure(1, -15, 100), 0: _failure(0, -9, 100)}
    rank, failure = cause(failures)
    assert rank == 0 and describe(failure) == "killed by SIGKILL"
    # A peer whose collective failed (an exit code) comes after the rank that was killed...
    assert cause({0: _failure(0, 1, 99), 1: _failure(1, -9, 100)})[0] == 1
    # ...and between two errors the earlier one, then the lower rank.
    assert cause({0: _failure(0, 1, 101), 1: _failure(1, 1, 100)})[0] == 1
    assert cause({1: _failure(1, 1, 100), 0: _failure(0, 1, 100)})[0] == 0
    # Stopped by SIGTERM from outside, every rank: the earliest.
    assert cause({0: _failure(0, -15, 101), 1: _failure(1, -15, 100)})[0] == 1


def test_an_error_report_read_half_written_is_still_one_line(monkeypatch, capsys):
    # torchrun json-loads a failed rank's error file; read while the rank writes it (a peer
    # SIGKILLed, this rank's collective failing at the same moment), it raises
    # JSONDecodeError out of run(): the launcher still ends with one line and exit 1.
    import json

    import torch.distributed.run as trun

    from spikebench.train import launch

    def run(args):
        raise json.JSONDecodeError("Expecting value", "", 0)

    monkeypatch.setattr(trun, "run", run)
    monkeypatch.setattr(launch, "die_with_parent", lambda: True)
    monkeypatch.setenv("SPIKEBENCH_PARENT_PID", "1")  # main() sets it: restored after
    assert launch.main(["2", "spikebench.train.command"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("data-parallel run failed: rank")
    assert "JSONDecodeError" in err[0]


def test_a_rank_writes_its_error_report_whole(tmp_path, monkeypatch):
    # The report appears under its final name only once written (a rename): what the agent
    # reads is torchrun's JSON, whole, or nothing.
    import json

    from spikebench.train.launch import recorded

    final = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(final))

    def fails():
        raise ValueError("bad lr")

    try:
        recorded(fails)()
    except ValueError:
        pass
    data = json.loads(final.read_text())
    assert data["message"]["message"] == "ValueError: bad lr"
    assert [p.name for p in tmp_path.iterdir()] == ["error.json"]  # no temporary left
