"""Fuzzing ``spikebench spikes`` with what is not a log, or not a place for a plot: FIFOs with
no writer, devices, endless and huge lines, names past the file system's 255 bytes, folders
and links where files belong. Each case is refused in one line with exit code 2, leaves
every input byte-identical and writes nothing; none may hang (a deadline guards each)."""

import os
import uuid
from pathlib import Path

from fuzzkit import deadline, refused
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spikebench.spikes.logs import MAX_LINE

FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
GOOD = "step,loss,grad_norm\n" + "".join(f"{i},{3 - i / 1000},1.0\n" for i in range(300))
LONG = "n" * 300  # one name past NAME_MAX (255 bytes)




def make_log(box: Path, kind: str) -> tuple[str, str]:
    """A log argument of ``kind`` inside ``box`` (or a device), and the refusal it gets."""
    if kind == "good":
        (box / "log.csv").write_text(GOOD)
        return "log.csv", ""
    if kind == "fifo":
        os.mkfifo(box / "log.csv")
        return "log.csv", "is a FIFO"
    if kind == "fifo_link":
        os.mkfifo(box / "pipe")
        (box / "log.jsonl").symlink_to(box / "pipe")
        return "log.jsonl", "is a FIFO"
    if kind in ("/dev/zero", "/dev/null"):
        return kind, "is a device"
    if kind == "zero_link":
        (box / "log.csv").symlink_to("/dev/zero")
        return "log.csv", "is a device"
    if kind == "folder":
        (box / "log.csv").mkdir()
        return "log.csv", "is a directory"
    if kind == "long_name":
        return LONG + ".csv", "too long"
    if kind == "long_folder":
        return f"{LONG}/log.csv", "too long"
    if kind in ("huge_line_csv", "huge_line_jsonl"):
        name = "log.csv" if kind.endswith("csv") else "log.jsonl"
        first = "step,loss\n" if name == "log.csv" else '{"step": 0, "loss": 1.0}\n'
        (box / name).write_text(first + "9" * (MAX_LINE + 1) + "\n")
        return name, "line 2: longer than"
    if kind == "no_newline":  # a regular file that is one endless-looking line of NULs
        (box / "log.txt").write_bytes(b"\0" * (MAX_LINE + 2))
        return "log.txt", "line 1: longer than"
    raise AssertionError(kind)


def make_plot(box: Path, kind: str) -> tuple[list[str], str]:
    """A --plot argument of ``kind`` (none: no --plot), and the refusal it gets."""
    if kind == "none":
        return [], ""
    if kind == "fifo":
        os.mkfifo(box / "out.png")
        return ["--plot", "out.png"], "is not a regular file"
    if kind == "long_name":
        return ["--plot", LONG + ".png"], "too long"
    if kind == "long_folder":
        return ["--plot", f"{LONG}/out.png"], "too long"
    if kind == "folder":
        (box / "out.png").mkdir()
        return ["--plot", "out.png"], "must be the path of a .png file"
    if kind == "no_folder":
        return ["--plot", "missing/out.png"], "no folder"
    if kind == "under_a_file":
        (box / "afile").write_text("x")
        return ["--plot", "afile/out.png"], "out.png"
    if kind == "device":
        return ["--plot", "/dev/zero"], "must be the path of a .png file"
    if kind == "not_png":
        return ["--plot", "out.pdf"], "must be the path of a .png file"
    raise AssertionError(kind)


LOGS = ["fifo", "fifo_link", "/dev/zero", "/dev/null", "zero_link", "folder", "long_name",
        "long_folder", "huge_line_csv", "huge_line_jsonl", "no_newline"]
PLOTS = ["fifo", "long_name", "long_folder", "folder", "no_folder", "under_a_file", "device",
         "not_png"]


@FAST
@given(st.one_of(st.tuples(st.sampled_from(LOGS), st.just("none")),
                 st.tuples(st.just("good"), st.sampled_from(PLOTS)),
                 st.tuples(st.sampled_from(LOGS), st.sampled_from(PLOTS))),
       st.sampled_from([[], ["--json"], ["--detector", "olmo"], ["--gap", "0"]]))
def test_spikes_refuses_what_is_not_a_log_or_a_place_for_a_plot(tmp_path, capsys, case, extra):
    log_kind, plot_kind = case
    box = tmp_path / uuid.uuid4().hex
    box.mkdir()
    log, log_err = make_log(box, log_kind)
    plot, plot_err = make_plot(box, plot_kind)
    with deadline():
        line = refused(["spikes", log, *plot, *extra], box, capsys)
    # The plot is checked first (before any reading); then the log.
    assert (plot_err or log_err) in line, line
    assert not list(box.glob("**/*.png")) or plot_kind in ("fifo", "folder")
