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
