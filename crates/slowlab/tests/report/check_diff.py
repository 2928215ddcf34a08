#!/usr/bin/env python3
"""Drives `slowlab diff --html`'s page in headless Chromium (Playwright);
the Rust test `diff.rs` runs it on a page it made. Exits non-zero with the
failed check on stderr.

    check_diff.py PAGE.html SCREENSHOT_DIR GROWN_FUNCTION

Checks: the page draws with no console error, no uncaught exception and
no network request; the table's first row is GROWN_FUNCTION; clicking the
`A` column sorts by it (descending: the row with the largest A first);
the filter keeps only matching rows; searching the flame graph sums the
matches of A and B, and B's is larger for GROWN_FUNCTION; clicking the
flame graph zooms into a frame. Saves screenshots into SCREENSHOT_DIR."""
import json
import os
import sys

from page_session import fail, open_page


def first_cells(page):
    return page.eval_on_selector_all(
        "#diff-table tbody tr", "trs => trs.map(tr => [...tr.cells].map(c => c.innerText))")


def main():
    if len(sys.argv) != 4:
        fail("usage: check_diff.py PAGE.html SCREENSHOT_DIR GROWN_FUNCTION")
    path, shots, grown = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3]
    os.makedirs(shots, exist_ok=True)
    with open_page(path) as page:
        page.screenshot(path=os.path.join(shots, "diff.png"), full_page=True)

        rows = first_cells(page)
        if not rows or rows[0][0] != grown:
            fail(f"first row is {rows[:1]}, expected {grown}")
        data = json.loads(page.eval_on_selector("#slowlab-data", "e => e.textContent"))
        if len(rows) != len(data["view"]["functions"]):
            fail(f"{len(rows)} rows shown of {len(data['view']['functions'])}")

        # Sort by A: the row with the largest A first.
        page.click("#diff-table th[data-key='a']")
        rows = first_cells(page)
        best = max(data["view"]["functions"], key=lambda r: r["a"])
        if rows[0][0] != best["name"]:
            fail(f"sorted by A, first row {rows[0]}, expected {best['name']}")
        if page.get_attribute("#diff-table", "data-sort") != "a desc":
            fail("sorting by A did not say so")

        # The filter keeps matching rows only.
        page.fill("#diff-filter", grown)
        rows = first_cells(page)
        if not rows or any(grown.lower() not in (r[0] + " " + r[1]).lower() for r in rows):
            fail(f"filter `{grown}` shows {rows}")
        page.fill("#diff-filter", "")

        # Search the flame graph: B's share of the grown function is larger.
        page.fill("#diff-search", grown)
        result = page.inner_text("#diff-search-result")
        try:
            a_part, b_part = result.split("→")
            a_pct = float(a_part.split("A")[1].strip().rstrip("%"))
            b_pct = float(b_part.split("B")[1].strip().rstrip("%"))
        except (ValueError, IndexError):
            fail(f"search result `{result}` does not read `matches: A x% → B y%`")
        if not b_pct > a_pct:
            fail(f"{grown}: A {a_pct}% → B {b_pct}%, expected growth")
        page.screenshot(path=os.path.join(shots, "diff-search.png"), full_page=True)
        page.fill("#diff-search", "")

        # Clicking the second row of the flame graph zooms into that frame.
        box = page.query_selector("#diff-canvas").bounding_box()
        page.mouse.click(box["x"] + box["width"] / 3, box["y"] + 17 * 1.5)
        zoom = page.get_attribute("#diff-canvas", "data-zoom")
        if not zoom:
            fail("clicking the flame graph did not zoom")
        page.screenshot(path=os.path.join(shots, "diff-zoom.png"), full_page=True)
    print(f"ok: first row {grown}, A {a_pct}% → B {b_pct}%, zoomed into {zoom}")


if __name__ == "__main__":
    main()
