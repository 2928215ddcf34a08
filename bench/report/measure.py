#!/usr/bin/env python3
"""Measures an interactive slowlab report in headless Chromium: its size,
the time from navigation to the page drawn (the page sets
body[data-ready] when its first draw is done, and records its own script
time in window.slowlab.timings), and the time to redraw after selecting a
time range (the page's own figure for the redraw, and the wall time of the
drag in the browser). Prints one JSON object.

    bench/report/measure.py REPORT.html [--runs N]

Needs Playwright (pip install playwright) and Debian's chromium."""
import argparse
import json
import os
import statistics
import sys
import time

from playwright.sync_api import sync_playwright

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def one_run(browser, url):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(str(e)))
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']", timeout=60000)
    # One more frame: the canvases are on screen.
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => r()))")
    load_s = time.perf_counter() - start
    script_ms = page.evaluate("() => window.slowlab.timings.load")
    box = page.locator("#timeline canvas.tl-canvas").bounding_box()
    x0, x1, y = box["x"] + 260, box["x"] + 260 + (box["width"] - 260) * 0.3, box["y"] + 10
    t = time.perf_counter()
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move(x1, y, steps=2)
    page.mouse.up()
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => r()))")
    select_wall_ms = (time.perf_counter() - t) * 1000
    select_ms = page.evaluate("() => window.slowlab.timings.select")
    page.close()
    return {"load_s": load_s, "script_ms": script_ms, "select_ms": select_ms,
            "select_wall_ms": select_wall_ms, "errors": errors}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    url = "file://" + os.path.abspath(args.report)
    load_before = os.getloadavg()[0]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox"] if os.geteuid() == 0 else [])
        runs = [one_run(browser, url) for _ in range(args.runs)]
        browser.close()
    med = lambda k: statistics.median(r[k] for r in runs)
    out = {
        "bytes": os.path.getsize(args.report),
        "runs": args.runs,
        "load_s_median": round(med("load_s"), 3),
        "load_s_max": round(max(r["load_s"] for r in runs), 3),
        "script_ms_median": round(med("script_ms"), 1),
        "select_ms_median": round(med("select_ms"), 1),
        "select_ms_max": round(max(r["select_ms"] for r in runs), 1),
        "select_wall_ms_median": round(med("select_wall_ms"), 1),
        "errors": sorted({e for r in runs for e in r["errors"]}),
        # Other work on the machine slows the browser down: say how much.
        "loadavg_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "cpus": os.cpu_count(),
    }
    print(json.dumps(out, indent=1))
    return 1 if out["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
