from spikebench.report.figures import figure, png, tex


def test_user_strings_are_shown_literally_by_mathtext():
    assert tex("a $b$ \\c") == "a \\$b\\$ \\\\c"


def test_png_of_a_figure_with_a_dollar_in_its_title():
    fig = figure(2, 1)
    fig.add_subplot().set_title(tex("arm $1"))
    assert png(fig).startswith(b"\x89PNG\r\n\x1a\n")
