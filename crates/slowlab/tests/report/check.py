#!/usr/bin/env python3
"""Drives an interactive slowlab report in headless Chromium (Playwright)
and checks what the issue asks of it; the Rust test `report_html.rs` runs
it on a report it made. Exits non-zero with the failed check on stderr.

    check.py REPORT.html SCREENSHOT_DIR [HOSTILE_NAME ...]

Checks: the page draws with no console error, no uncaught exception and
no network request; every HOSTILE_NAME shows on the page as text while no
element it would create exists and no dialog opens; selecting a time range
on the timeline changes the rows of the threads table; clicking the CPU
flame graph zooms it and searching highlights and sums matches; clicking
the first finding selects its threads (and time). Saves a screenshot of
each view into SCREENSHOT_DIR."""
import os
import sys

from page_session import fail, open_page


def rows(page, table):
    return page.eval_on_selector_all(
        f"#{table} tbody tr", "trs => trs.map(tr => tr.innerText)")


def main():
    if len(sys.argv) < 3:
        fail("usage: check.py REPORT.html SCREENSHOT_DIR [HOSTILE_NAME ...]")
    report, shots, hostile = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3:]
    os.makedirs(shots, exist_ok=True)
    with open_page(report) as page:
        page.screenshot(path=os.path.join(shots, "answer.png"))

        # Hostile names: shown as text, never as elements.
        text = page.inner_text("body")
        # The lanes are canvas text: the names are in the tables' DOM.
        page.click("button.tab[data-pane='lifetimes']")
        text += page.inner_text("#tables")
        page.click("button.tab[data-pane='syscalls']")
        text += page.inner_text("#tables")
        # Paths: a long table; its filter finds the hostile one.
        for name in hostile:
            if name.startswith("/"):
                page.fill("#paths-table-filter", name[:12])
                text += page.inner_text("#paths-table")
        page.fill("#paths-table-filter", "")
        page.click("button.tab[data-pane='threads']")
        text += page.inner_text("#tables")
        for name in hostile:
            if name not in text:
                fail(f"{name!r} is not shown as text")
        # The page itself makes no img, iframe, object or embed, and its
        # own <b> elements are labels: a <b> holding "hb" came from a name.
        injected = page.evaluate("""() => [...document.querySelectorAll('img, iframe, object, embed')]
            .concat([...document.querySelectorAll('b')].filter(b => b.textContent === 'hb'))
            .map(e => e.outerHTML)""")
        if injected:
            fail(f"elements from trace strings exist: {injected}")

        # A range selection on the timeline changes the threads table.
        before = rows(page, "threads-table")
        if not before:
            fail("the threads table is empty")
        canvas = page.locator("#timeline canvas.tl-canvas")
        canvas.evaluate("e => e.scrollIntoView({block: 'center'})")
        box = canvas.bounding_box()
        x0 = box["x"] + 215 + (box["width"] - 215) * 0.55
        x1 = box["x"] + 215 + (box["width"] - 215) * 0.75
        y = box["y"] + 9
        page.mouse.move(x0, y)
        page.mouse.down()
        page.mouse.move(x1, y, steps=4)
        page.mouse.up()
        sel = page.evaluate("() => [window.slowlab.sel.from, window.slowlab.sel.to]")
        after = rows(page, "threads-table")
        if sel[1] - sel[0] <= 0 or after == before:
            fail(f"selecting {sel} did not change the threads table")
        page.locator("#timeline-section").screenshot(path=os.path.join(shots, "timeline.png"))
        page.locator("#tables").screenshot(path=os.path.join(shots, "tables.png"))
        page.click("button.tab[data-pane='waits']")
        page.locator("#tables").screenshot(path=os.path.join(shots, "waits.png"))
        page.click("button.tab[data-pane='syscalls']")
        page.locator("#tables").screenshot(path=os.path.join(shots, "syscalls.png"))
        page.click("button:text('whole trace')")

        # The CPU flame graph: click a function (the third row: below "all"
        # and the processes) to zoom.
        # Its scroll box at the top (a canvas taller than the box would
        # otherwise be centred, its top rows scrolled out of sight).
        flame = page.locator("#cpu-flame canvas")
        page.locator("#cpu-flame .flame-scroll").evaluate(
            "e => { e.scrollIntoView({block: 'center'}); e.scrollTop = 0; }")
        fb = flame.bounding_box()
        zoomed = ""
        for frac in (0.5, 0.25, 0.75, 0.1, 0.9):
            page.mouse.click(fb["x"] + fb["width"] * frac, fb["y"] + 17 * 2 + 8)
            zoomed = page.inner_text("#cpu-flame .zoom-label")
            if zoomed:
                break
        if not zoomed.startswith("zoomed into"):
            fail("clicking the CPU flame graph did not zoom it")
        if not page.inner_text("#cpu-flame .butterfly"):
            fail("no butterfly for the clicked function")
        page.locator("#cpu-flame").screenshot(path=os.path.join(shots, "flame-zoomed.png"))
        page.click("#cpu-flame .reset-zoom")
        # Search: the innermost function most samples are in.
        page.click("button.tab[data-pane='functions']")
        top_fn = page.eval_on_selector("#functions-table tbody tr td", "td => td.textContent")
        page.fill("#cpu-flame input.flame-search", top_fn)
        result = page.inner_text("#cpu-flame .search-result")
        if "matching frames" not in result or result.startswith("0 matching"):
            fail(f"searching {top_fn!r} found nothing: {result!r}")
        page.locator("#flames").screenshot(path=os.path.join(shots, "flames.png"))
        page.fill("#cpu-flame input.flame-search", "")

        # Clicking the first finding selects its threads.
        finding = page.query_selector("#finding-0")
        if finding is None:
            fail("the report has no finding to click")
        expected = page.evaluate(
            "() => JSON.parse(document.getElementById('slowlab-data').textContent).findings[0].threads")
        finding.click()
        chosen = page.evaluate("() => window.slowlab.sel.threads ? [...window.slowlab.sel.threads].sort((a, b) => a - b) : null")
        if not expected or chosen != sorted(expected):
            fail(f"clicking the finding selected {chosen}, expected {sorted(expected)}")
        page.locator("#answer").screenshot(path=os.path.join(shots, "findings.png"))
        page.screenshot(path=os.path.join(shots, "finding-selected.png"))
    print(f"ok: {len(before)} thread rows, then {len(after)} for {sel}; zoom, search ({result}), finding")


if __name__ == "__main__":
    main()
