#!/usr/bin/env python3
"""check_lines.py -- checks that each Windows probe printed the article's lines, in the
article's order and format, at the sizes test.sh runs (--quick, plus notify_buffer's
separate-process and recursive watchers).

Usage: check_lines.py WORK_DIR   (the directory where test.sh left PROBE.out files)

It checks formats and sequences, not the numbers' meaning: under Wine every pathology
is absent (see README.md). Exits 1 after reporting every probe that failed.
"""
import os
import re
import sys

NUM = r"\d+\.\d+"


def read(work, name):
    with open(os.path.join(work, name), encoding="utf-8", errors="replace") as f:
        return [line.rstrip("\r") for line in f.read().split("\n")]


def printed(work, name):
    return [line for line in read(work, name) if line.strip()]


def expect(line, pattern, what):
    match = re.fullmatch(pattern, line)
    assert match, f"{what}: {line!r} does not match {pattern!r}"
    return match


def topdown_alloc(work):
    lines = printed(work, "topdown_alloc.out")
    sizes = []
    for i in range(0, len(lines), 2):
        top = expect(lines[i], rf"Topdown allocs took +{NUM} s for +(\d+) allocs of 64 KB "
                     r"blocks \(total is (\d+) MB\)\.", "topdown line")
        expect(lines[i + 1], rf"Normal  allocs took +{NUM} s for +{top[1]} allocs of 64 KB "
               rf"blocks \(total is {top[2]} MB\)\.", "normal line")
        sizes.append(int(top[1]))
    assert sizes == list(range(0, 4001, 1000)), f"sizes {sizes}"


def notify_rounds(lines, files):
    """The four FileStress lines and the ratio line, per round; returns the rounds."""
    rounds = 0
    i = 0
    while i < len(lines):
        if re.fullmatch(rf"{NUM} seconds to create \d+ files in .*", lines[i]):
            for offset, (verb, tree) in enumerate([("create", "Trackedfiles"),
                                                   ("delete", "Trackedfiles"),
                                                   ("create", "Untrackedfiles"),
                                                   ("delete", "Untrackedfiles")]):
                expect(lines[i + offset],
                       rf"\d+\.\d{{3}} seconds to {verb} {files} files in .*\\{tree}\\TestFiles\.",
                       "FileStress line")
            expect(lines[i + 4], r"Tracked files take \d+\.\d\d times as long\.", "ratio line")
            rounds += 1
            i += 5
        else:
            i += 1
    return rounds


def watcher_counts(lines):
    return [int(expect(line, r"The watcher received (\d+) notifications \(\d+ overflowed "
                       r"reads\)\.", "watcher line")[1])
            for line in lines if line.startswith("The watcher received")]


def notify_buffer(work):
    lines = printed(work, "notify_buffer.out")
    assert lines[0] == "No watcher: Trackedfiles is not tracked, a control.", lines[0]
    headers = [line for line in lines if line.startswith("Watcher: ")]
    for size, header in zip((16, 2048), headers):
        expect(header, rf"Watcher: ReadDirectoryChangesW with a {size} KiB buffer on "
               r".*\\Trackedfiles\\TestFiles, in a thread of this process\.", "watcher header")
    assert len(headers) == 2, headers
    assert notify_rounds(lines, 200) == 3, "expected 3 rounds of 200 files"
    counts = watcher_counts(lines)
    # "Hello world!" in every file: several notifications per file, not one.
    assert len(counts) == 2 and all(n > 200 for n in counts), f"notifications {counts}"

    lines = printed(work, "notify_watcherprocess.out")
    expect(lines[0], r"Watcher: ReadDirectoryChangesW with a 16 KiB buffer on "
           r".*\\Trackedfiles\\TestFiles, in a separate process\.", "process header")
    assert notify_rounds(lines, 20) == 1, "expected 1 round of 20 files"
    counts = watcher_counts(lines)
    assert len(counts) == 1 and counts[0] > 20, f"separate process saw {counts}"

    lines = printed(work, "notify_recursive.out")
    expect(lines[0], r"Watcher: ReadDirectoryChangesW with a 16 KiB buffer on "
           r".*\\Trackedfiles and its subtree, in a thread of this process\.", "subtree header")
    assert notify_rounds(lines, 20) == 1, "expected 1 round of 20 files"
    assert len(watcher_counts(lines)) == 1


def log_probe(work):
    lines = printed(work, "log_probe.out")
    assert lines[0].startswith("This imitates Application Verifier's log naming") and \
        "it does not run Application Verifier" in lines[0], lines[0]
    for child in ("probe", "unique"):
        totals = [int(m[1]) for m in (
            re.fullmatch(rf"\d+\.\d\d seconds elapsed time for 10 invocations of log_probe\.exe "
                         rf"--child-{child} \((\d+) total, at [ \d]\d:\d\d:\d\d\.\d\d\)", line)
            for line in lines) if m]
        assert totals == [10, 20, 30, 40], f"--child-{child} batches {totals}"
    assert any(line.startswith("One existence check takes ") for line in lines)


def teardown_lock(work):
    raw = read(work, "teardown_lock.out")
    lines = [line for line in raw if line.strip()]
    expect(lines[0], r"Main process pid is \d+\.", "pid line")
    phase = [
        rf"Process creation took {NUM} s \({NUM} ms per process\)\.",
        rf"Lock blocked for {NUM} s total, maximum was {NUM} s\.",
        rf"Average block time was {NUM} s\.",
        r"Process termination starts now\.",
        rf"Process destruction took {NUM} s \({NUM} ms per process\)\.",
        rf"Lock blocked for {NUM} s total, maximum was {NUM} s\.",
        rf"Average block time was {NUM} s\.",
    ]
    at = 1
    for suffix, gui in (("", "0"), (" with user32.dll loaded", "12")):
        expect(lines[at], rf"Testing with 12 descendant processes{suffix}\.", "testing line")
        for offset, pattern in enumerate(phase):
            expect(lines[at + 1 + offset], pattern, "phase line")
        expect(lines[at + 8], rf"{gui} of 12 descendant processes had user32\.dll or "
               r"gdi32\.dll loaded\.", "user32/gdi32 check")
        at += 9
    expect(lines[at], rf"Elapsed uptime is {NUM} days\.", "uptime line")
    expect(lines[at + 1], rf"Awake uptime is {NUM} days\.", "uptime line")
    assert len(lines) == at + 2, f"{len(lines) - at - 2} extra lines"
    # The original's empty line before "Process termination starts now.".
    for i, line in enumerate(raw):
        if line == "Process termination starts now.":
            assert i > 0 and raw[i - 1] == "", "no empty line before the termination phase"


def working_set_cap(work):
    lines = printed(work, "working_set_cap.out")
    passes = {"normal": 0, "background": 0, "EmptyWorkingSet": 0}
    i = 0
    if lines[0].startswith("SetPriorityClass(PROCESS_MODE_BACKGROUND_BEGIN) failed"):
        i = 1  # Wine: no background passes
    while i < len(lines):
        match = expect(lines[i], r"\d+ ticks to scan memory \d+ times in "
                       r"(normal|background|EmptyWorkingSet) mode\.( \d+\.\d times as long\.)?",
                       "scan line")
        assert (match[1] == "normal") == (match[2] is None), f"ratio on {lines[i]!r}"
        passes[match[1]] += 1
        expect(lines[i + 1], rf"Working set was {NUM} MiB at the end of the pass\.",
               "working-set line")
        i += 2
    # --quick: 2 pairs; each background/EmptyWorkingSet pass follows a normal pass.
    assert passes["EmptyWorkingSet"] == 2, passes
    assert passes["normal"] == passes["background"] + passes["EmptyWorkingSet"], passes


def main():
    work = sys.argv[1]
    bad = 0
    for check in (topdown_alloc, notify_buffer, log_probe, teardown_lock, working_set_cap):
        try:
            check(work)
            print(f"    {check.__name__}: ok")
        except (AssertionError, IndexError, ValueError, OSError) as error:
            print(f"    {check.__name__}: {type(error).__name__}: {error}", file=sys.stderr)
            bad += 1
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
