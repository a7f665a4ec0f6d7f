import re

from fixtures import XSS_CHOICE, XSS_NAME

from spikebench.report import html as htmlmod


def test_html_is_self_contained_and_escaped(built):
    page = built["xss"]["html"].read_text()
    assert not re.search(r"(?:src|href)=[\"'](?!data:|#)", page)
    assert "http://" not in page and "https://" not in page
    assert page.count('src="data:image/png;base64,') == 5
    assert "<title>Spike report: &lt;script&gt;alert(1)&lt;/script&gt;</title>" in page
    assert XSS_NAME not in page and XSS_CHOICE not in page
    assert page.count("<script>") == 1  # the sorter, nothing else
    assert htmlmod.CSP in page and htmlmod._sha(htmlmod.SORT_JS) in htmlmod.CSP
    assert f"<script>{htmlmod.SORT_JS}</script>" in page
    assert f"<style>{htmlmod.CSS}</style>" in page
    assert '<table class="sortable">' in page


def test_nav_links_every_numbered_section(built):
    page = built["main"]["html"].read_text()
    nav = re.search(r"<nav>(.*?)</nav>", page).group(1)
    keys = re.findall(r'<a href="#([a-z_]+)">', nav)
    assert keys == ["summary", "strategy", "claims", "spike_counts", "cleaning", "curves", "pareto",
                    "importance", "lr_curves", "lr_sensitivity", "lr", "trials", "setup"]
    assert all(f'<h2 id="{k}">' in page for k in keys)
