"""What the browser checks of slowlab's pages share (check.py for the
report, check_diff.py for the diff page): the Playwright import guard,
`fail`, and `open_page`, which opens a page written to a file in headless
Chromium, waits until the page says it is drawn (body[data-ready='1']),
and, when the `with` block ends, fails on any console error, uncaught
exception, dialog or network request the page made. It checks nothing of
the page's content: that is each script's job."""
import contextlib
import os
import sys

try:
    from playwright.sync_api import sync_playwright
except ImportError:
    print("FAIL: playwright is not installed (pip install playwright; scripts/setup.sh does it)", file=sys.stderr)
    sys.exit(2)

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


@contextlib.contextmanager
def open_page(path):
    """Yields the Playwright page of PATH, drawn; see the module doc."""
    if not os.path.exists(CHROMIUM):
        fail(f"{CHROMIUM} is missing (apt-get install chromium; scripts/setup.sh does it)")
    url = "file://" + os.path.abspath(path)
    errors, requests, dialogs = [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox"] if os.geteuid() == 0 else [])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.on("request", lambda r: r.url != url and requests.append(r.url))
        page.goto(url)
        page.wait_for_selector("body[data-ready='1']", timeout=30000)
        yield page
        browser.close()
    if dialogs:
        fail(f"a dialog opened: {dialogs}")
    if requests:
        fail(f"the page made requests: {requests}")
    if errors:
        fail(f"console errors: {errors}")
