"""The HTML report in a real browser: headless Chromium, no console errors, every image
decoded, the table sorter working under the page's CSP, and a hostile study name shown as
text with nothing executed. The report file is opened unmodified: the checks run through
the DevTools protocol.

Chromium missing: these tests FAIL when the environment variable CI is set (a CI machine
must have it: see .ci/setup-services) and are skipped elsewhere.
"""

import json
import os
import queue
import shutil
import subprocess
import threading
import time

import pytest
from fixtures import XSS_ARM, XSS_CHOICE, XSS_NAME, make_study, make_xss_study

from spikebench.report import build_report

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT = 60.0

# Runs before any of the page's scripts (CDP injects it; the page's CSP does not apply to
# it): records errors, including failed resources (capture phase) and CSP violations, and
# turns alert() into a marker an injected payload would set.
SETUP_JS = """
window.__errors = [];
window.alert = function () { document.documentElement.setAttribute("data-xss", "1"); };
window.addEventListener("error", function (e) {
  window.__errors.push("error: " + (e.message || (e.target && e.target.tagName) || "?"));
}, true);
document.addEventListener("securitypolicyviolation", function (e) {
  window.__errors.push("csp: " + e.violatedDirective);
});
"""

# After load: sorts the trials table twice by its first column (the page's own sorter),
# then decodes every image.
CHECK_JS = """
(async function () {
  var out = {sorted: null, aria: null, up: null, down: null};
  var table = document.querySelector("table.sortable");
  function column() {
    return Array.prototype.map.call(table.tBodies[0].rows,
                                    function (r) { return r.cells[0].textContent; });
  }
  if (table) {
    var th = table.tHead.rows[0].cells[0];
    th.click();
    out.up = column();
    th.click();
    out.down = column();
    out.sorted = out.down[0];
    out.aria = th.getAttribute("aria-sort");
  }
  var imgs = Array.prototype.slice.call(document.images);
  out.images = imgs.length;
  out.decoded = 0;
  for (var i = 0; i < imgs.length; i++) {
    try { await imgs[i].decode(); if (imgs[i].naturalWidth > 0) { out.decoded++; } }
    catch (e) { window.__errors.push("decode: " + e); }
  }
  out.errors = window.__errors.slice();
  out.scripts = document.scripts.length;
  out.handlers = document.querySelectorAll("[onerror], [onload], [onclick]").length;
  out.foreign = imgs.filter(function (i) {
    return i.getAttribute("src").indexOf("data:image/png;base64,") !== 0; }).length;
  out.text = document.body.textContent;
  out.xss = document.documentElement.hasAttribute("data-xss");
  return out;
})()
"""


class Browser:
    """Headless Chromium driven over ``--remote-debugging-pipe`` (CDP, JSON messages ended
    by NUL on file descriptors 3 and 4, mapped here onto the child's stdin and stdout), so
    the test needs no websocket client and no package beyond the browser itself."""

    def __init__(self, path: str, profile):
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run",
                "--no-default-browser-check", f"--user-data-dir={profile}",
                "--remote-debugging-pipe", "about:blank"]
        self.proc = subprocess.Popen(
            ["sh", "-c", 'exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null', path, *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.inbox: queue.Queue = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        buf = b""
        while chunk := self.proc.stdout.read1(65536):
            buf += chunk
            while b"\0" in buf:
                msg, buf = buf.split(b"\0", 1)
                self.inbox.put(json.loads(msg))
        self.inbox.put(None)

    def send(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.proc.stdin.write(json.dumps(msg).encode() + b"\0")
        self.proc.stdin.flush()
        return self.next_id

    def wait(self, pred, events):
        """Messages until ``pred(msg)``; every event on the way is kept in ``events``."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            msg = self.inbox.get(timeout=max(0.1, deadline - time.monotonic()))
            assert msg is not None, "the browser exited"
            if "method" in msg:
                events.append(msg)
            if pred(msg):
                return msg

    def call(self, method, params=None, session=None, events=None):
        i = self.send(method, params, session)
        msg = self.wait(lambda m: m.get("id") == i, [] if events is None else events)
        assert "error" not in msg, msg
        return msg["result"]

    def open(self, url: str) -> dict:
        """Load ``url`` in a fresh tab; returns the check's result, the DOM and the console
        messages, exceptions and error log entries the page produced."""
        events: list = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=s, events=events)
        self.call("Page.addScriptToEvaluateOnNewDocument", {"source": SETUP_JS}, s, events)
        self.call("Page.navigate", {"url": url}, s, events)
        if not any(e["method"] == "Page.loadEventFired" for e in events):
            self.wait(lambda m: m.get("method") == "Page.loadEventFired", events)

        def evaluate(expr):
            r = self.call("Runtime.evaluate", {"expression": expr, "awaitPromise": True,
                                               "returnByValue": True}, s, events)
            assert "exceptionDetails" not in r, r
            return r["result"]["value"]

        check = evaluate(CHECK_JS)
        dom = evaluate("document.documentElement.outerHTML")
        self.call("Target.closeTarget", {"targetId": target}, events=events)
        console = [e for e in events if e["method"] in ("Runtime.consoleAPICalled",
                                                        "Runtime.exceptionThrown")
                   or (e["method"] == "Log.entryAdded"
                       and e["params"]["entry"]["level"] in ("error", "warning"))]
        return {"check": check, "dom": dom, "console": console}

    def close(self):
        try:
            self.send("Browser.close")
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def _browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    msg = "headless Chromium not found (apt-get install chromium)"
    if os.environ.get("CI"):
        pytest.fail(msg + "; CI is set, so this is an error")
    pytest.skip(msg)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    path = _browser()
    root = tmp_path_factory.mktemp("browser")
    # 7 arms, 4 search trials and a failed one: trial numbers 0-11, so a sort by text
    # (0, 1, 10, 11, 2, ...) and a sort by number differ.
    main = build_report(make_study(root, folder="main", search=4, failed=1), root / "out-main")
    xss = build_report(make_xss_study(root), root / "out-xss")
    browser = Browser(path, root / "profile")
    try:
        yield {name: (browser.open(paths["html"].resolve().as_uri()), paths)
               for name, paths in (("main", main), ("xss", xss))}
    finally:
        browser.close()


@pytest.mark.parametrize("name", ["main", "xss"])
def test_page_loads_without_errors_and_every_image_decodes(pages, name):
    got, paths = pages[name]
    assert got["console"] == [], got["console"]
    check = got["check"]
    assert check["errors"] == []
    n_images = sum(1 for k in paths if k not in ("markdown", "html"))
    assert n_images >= 4 and check["images"] == n_images
    assert check["decoded"] == n_images


def test_trials_table_sorts_under_the_pages_csp(pages):
    check = pages["main"][0]["check"]
    # One click on "#" sorts ascending by number, a second descending.
    assert check["up"] == [str(n) for n in range(12)]
    assert check["down"] == [str(n) for n in reversed(range(12))]
    assert (check["aria"], check["sorted"]) == ("descending", "11")


def test_hostile_study_name_shows_as_text_and_never_runs(pages):
    got, _ = pages["xss"]
    dom = got["dom"]
    assert got["check"]["xss"] is False and "data-xss" not in dom
    # Serialised text nodes escape "<": the name is text in the title and the heading ...
    assert "<title>Spike report: &lt;script&gt;alert(1)&lt;/script&gt;</title>" in dom
    assert '<h1 id="top">Spike report: &lt;script&gt;alert(1)&lt;/script&gt;</h1>' in dom
    # ... and no element came out of it, of the hostile arm name or of the parameter value.
    assert XSS_NAME not in dom
    check = got["check"]
    assert check["scripts"] == 1  # the report's sorter
    assert check["handlers"] == 0 and check["foreign"] == 0
    for text in (XSS_NAME, XSS_ARM, XSS_CHOICE):
        assert text in check["text"]
