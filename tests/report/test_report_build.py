import stat

from spikebench.report import build_report


def test_images_are_linked_and_written(built):
    md = built["main"]["markdown"].read_text()
    for name in ("spike_counts", "curves", "pareto", "importance"):
        assert f"]({name}.png)" in md
        assert built["main"][name].read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "lr" not in built["main"]
    assert "against the learning rate\n\n**Not available:** the study did not vary" in md


def test_every_file_is_shared_readable_and_no_temporary_is_left(built):
    out = built["main"]["markdown"].parent
    for path in out.iterdir():
        assert not path.name.startswith("."), path
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def test_a_plot_the_new_report_lacks_is_removed(built, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "lr.png").write_bytes(b"stale")
    paths = build_report(built["root"] / "main", out)
    assert "lr" not in paths and not (out / "lr.png").exists()
    assert (out / "pareto.png").is_file()
