#!/usr/bin/env python3
"""Drives the Locks table of an interactive slowlab report of the
lock_hold fixture in headless Chromium (Playwright); the Rust test
`report_html.rs` runs it. Exits non-zero with the failed check on stderr.

    check_locks.py REPORT.html SCREENSHOT_DIR ADDRESS

Checks: the Locks tab lists the mutex at ADDRESS (as the program printed
it) with its three "waiter" threads and the thread "holder" first among
its holders; clicking its row chooses it (the row is marked, the lock's
threads are selected) and the timeline draws its waits and holder →
waiter arrows: the page's record of what it drew (`slowlab.lockDrawn`)
counts at least one arrow per round of the holder (15), and the lanes'
canvas has pixels of the arrows' colour, which it had none of before;
zoomed to the first wait's end, an arrow is still drawn; a second click
clears it (no record, no such pixels). Saves screenshots into
SCREENSHOT_DIR."""
import os
import sys

from page_session import fail, open_page

# The arrows' colour (timeline.js drawLock).
LOCK_PIXELS = """() => {
  const c = document.querySelector('.tl-canvas');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i] === 176 && d[i + 1] === 0 && d[i + 2] === 140 && d[i + 3] === 255) n++;
  return n;
}"""


def lock_rows(page):
    return page.eval_on_selector_all(
        "#locks-table tbody tr",
        "trs => trs.map(tr => [...tr.cells].map(td => td.innerText))")


def main():
    if len(sys.argv) != 4:
        fail("usage: check_locks.py REPORT.html SCREENSHOT_DIR ADDRESS")
    report, shots, address = os.path.abspath(sys.argv[1]), sys.argv[2], int(sys.argv[3], 16)
    os.makedirs(shots, exist_ok=True)
    with open_page(report) as page:
        if page.evaluate(LOCK_PIXELS):
            fail("the lanes have the lock arrows' colour before a lock is chosen")
        page.click("button.tab[data-pane='locks']")
        rows = lock_rows(page)
        at = [i for i, r in enumerate(rows) if int(r[0].split()[0], 16) == address]
        if not at:
            fail(f"no row of the lock {address:#x}: {rows}")
        row = rows[at[0]]
        if row[1] != "mutex":
            fail(f"the lock is not a mutex: {row}")
        if not row[3].startswith("3: ") or row[3].count("waiter (") != 2:
            fail(f"not 3 waiters (the first two named): {row}")
        if not row[4].split(": ", 1)[1].startswith("holder ("):
            fail(f"the holder 'holder' is not the first holder: {row}")
        page.screenshot(path=os.path.join(shots, "locks-table.png"), full_page=False)

        page.click(f"#locks-table tbody tr:nth-child({at[0] + 1})")
        drawn = page.evaluate("() => window.slowlab.lockDrawn")
        if not drawn or drawn["address"] != f"{address:#x}":
            fail(f"choosing the lock drew nothing of it: {drawn}")
        if drawn["arrows"] < 15 or drawn["waits"] < 15:
            fail(f"fewer arrows than the holder's 15 releases: {drawn}")
        pixels = page.evaluate(LOCK_PIXELS)
        if pixels < 100:
            fail(f"the arrows are not on the canvas ({pixels} pixels of their colour)")
        chosen = page.eval_on_selector_all("#locks-table tbody tr.chosen", "trs => trs.length")
        if chosen != 1:
            fail(f"{chosen} rows marked as chosen")
        sel = page.evaluate("() => [...window.slowlab.sel.threads || []].length")
        if sel < 4:
            fail(f"the lock's waiters and holder are not selected ({sel} threads)")
        page.locator("#timeline").screenshot(path=os.path.join(shots, "lock-arrows.png"))
        # Zoomed onto the end of its first released wait: still an arrow.
        page.evaluate("""() => {
          const t = window.slowlab.timeline, L = window.slowlab.lockDrawn;
          const d = JSON.parse(document.getElementById('slowlab-data').textContent).locks[L.lock];
          const w = d.waits.find((w) => w.holder >= 0);
          t.view = { from: w.to_s * 1e6 - 300, to: w.to_s * 1e6 + 300 };
          t.draw();
        }""")
        zoomed = page.evaluate("() => window.slowlab.lockDrawn")
        if zoomed["arrows"] < 1:
            fail(f"no arrow at the end of a released wait: {zoomed}")
        page.locator("#timeline").screenshot(path=os.path.join(shots, "lock-arrows-zoomed.png"))

        page.click(f"#locks-table tbody tr.chosen")
        if page.evaluate("() => window.slowlab.lockDrawn") is not None or page.evaluate(LOCK_PIXELS):
            fail("a second click did not clear the lock")
    print(f"locks table ok: {drawn['waits']} waits, {drawn['arrows']} arrows of {address:#x}")


if __name__ == "__main__":
    main()
