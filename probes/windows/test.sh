#!/usr/bin/env bash
# probes/windows/test.sh -- builds every Windows probe with mingw-w64 (warnings are
# errors), runs each under Wine at --quick sizes in a throw-away WINEPREFIX, and checks
# that each exits 0, rejects a bad argument with exit 2, prints the article's lines in
# the article's order and format, and appends one JSON line in the `slowlab lab --json`
# schema whose "lines" match what it printed. Also runs notify_buffer's watcher in a
# separate process and recursively, and checks that slowlab.wprp is well-formed XML
# with consistent ids and the providers the articles' traces need.
#
# It proves the programs run and report correctly, NOT the pathologies: Wine is not the
# Windows kernel. Skips (exit 0, "SKIP: ...") when mingw-w64, Wine or python3 is missing.
#
# Optional environment:
#   WINE=/path/to/wine64        the Wine loader (default: wine64 or wine on PATH, else
#                               /usr/lib/wine/wine64)
#   SLOWLAB_BIN=/path/slowlab   also run `slowlab import` on the results
#   SLOWLAB_PROBE_RESULTS=FILE  copy the JSON lines the probes wrote to FILE
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mingw_cc=${MINGW_CC:-x86_64-w64-mingw32-gcc}
probes=(topdown_alloc notify_buffer log_probe teardown_lock working_set_cap)
# Extra arguments of the main run (besides --quick --json FILE).
declare -A extra_args=([working_set_cap]="--empty-working-set")
declare -A scenario_ids=(
    [topdown_alloc]=topdown-alloc [notify_buffer]=notify-buffer [log_probe]=log-probe
    [teardown_lock]=teardown-lock [working_set_cap]=working-set-cap
)

skip() {
  echo "SKIP: $*"
  # scripts/test.sh fails the run on any skip it finds in this log.
  [[ -z ${SLOWLAB_SKIP_LOG:-} ]] || echo "SKIP: Windows probes: $*" >>"$SLOWLAB_SKIP_LOG"
  exit 0
}
fail() { echo "FAIL: $*" >&2; exit 1; }

command -v "$mingw_cc" >/dev/null || skip "$mingw_cc not found (Debian: apt-get install gcc-mingw-w64-x86-64)"
command -v python3 >/dev/null || skip "python3 not found"
command -v make >/dev/null || skip "make not found"
wine=${WINE:-}
if [[ -z $wine ]]; then
    for candidate in wine64 wine /usr/lib/wine/wine64; do
        if command -v "$candidate" >/dev/null; then
            wine=$(command -v "$candidate")
            break
        fi
    done
fi
[[ -n $wine && -x $wine ]] || skip "Wine not found (Debian: apt-get install wine64; or set WINE=/path/to/wine64)"
wineserver=$(dirname "$wine")/wineserver
[[ -x $wineserver ]] || wineserver=$(command -v wineserver || true)

started=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/slowlab-wine.XXXXXX")
cleanup() {
    if [[ -n ${wineserver:-} && -x $wineserver ]]; then
        WINEPREFIX="$work/prefix" "$wineserver" -k >/dev/null 2>&1 || true
        WINEPREFIX="$work/prefix" "$wineserver" -w >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

export WINEPREFIX="$work/prefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
# Debian's wineserver keeps its socket directory under $TMPDIR: keep it in $work too.
mkdir "$work/tmp"
export TMPDIR="$work/tmp"
unset DISPLAY WAYLAND_DISPLAY # headless: Wine's null display driver

# A Unix path as Wine sees it (drive Z: is /).
winpath() { local p=$1; echo "Z:${p//\//\\}"; }

echo "== build (mingw-w64, -Werror)"
make -s -C "$here" WERROR=-Werror CC="$mingw_cc" >"$work/build.log" 2>&1 ||
    { cat "$work/build.log" >&2; fail "build failed"; }
for probe in "${probes[@]}"; do
    [[ -f $here/build/$probe.exe ]] || fail "build/$probe.exe was not built"
done

echo "== wine prefix"
t0=$(date +%s)
timeout 120 "$wine" wineboot --init >"$work/wineboot.log" 2>&1 ||
    { cat "$work/wineboot.log" >&2; fail "wineboot --init failed"; }
echo "prefix ready in $(( $(date +%s) - t0 )) s ($("$wine" --version 2>/dev/null || echo wine))"

results="$work/results.jsonl"
for probe in "${probes[@]}"; do
    exe="$here/build/$probe.exe"
    echo "== $probe --quick"
    t0=$(date +%s)
    for attempt in 1 2; do
        rc=0
        rm -f "$work/$probe.jsonl"
        # shellcheck disable=SC2086 # extra_args holds words
        timeout 150 "$wine" "$exe" --quick ${extra_args[$probe]:-} \
            --json "$(winpath "$work/$probe.jsonl")" >"$work/$probe.out" 2>"$work/$probe.err" || rc=$?
        # Wine's CreateProcess once failed with ERROR_INTERNAL_ERROR (1359)
        # half-way through log_probe's launches (a CI run; the rerun of the
        # same build passed): Wine's own failure, not the probe's, so it
        # gets one more run, said here. Any other failure fails at once.
        if [[ $rc -ne 0 && $attempt -eq 1 ]] && grep -q '(error 1359)' "$work/$probe.err"; then
            echo "    Wine failed inside CreateProcess (error 1359, ERROR_INTERNAL_ERROR); running $probe once more"
            continue
        fi
        break
    done
    sed 's/\r$//' "$work/$probe.out" | sed 's/^/    /'
    if [[ $rc -ne 0 ]]; then
        sed 's/^/    stderr: /' "$work/$probe.err" >&2
        fail "$probe --quick exited with $rc"
    fi
    echo "    ($(( $(date +%s) - t0 )) s)"
    [[ -s $work/$probe.jsonl ]] || fail "$probe wrote no JSON line"
    cat "$work/$probe.jsonl" >>"$results"

    rc=0
    timeout 60 "$wine" "$exe" --no-such-option >/dev/null 2>"$work/$probe.bad" || rc=$?
    [[ $rc -eq 2 ]] || fail "$probe --no-such-option exited with $rc, expected 2"
    [[ $(grep -c . "$work/$probe.bad") -eq 1 ]] || fail "$probe: bad-argument error is not one line"
    rc=0
    timeout 60 "$wine" "$exe" --help >"$work/$probe.help" 2>&1 || rc=$?
    [[ $rc -eq 0 ]] || fail "$probe --help exited with $rc"
    grep -q '^usage:' "$work/$probe.help" || fail "$probe --help printed no usage line"
done

# notify_buffer's other watchers: one in a separate process (as the article's), one
# watching the whole Trackedfiles tree. Wine delivers no events for a subtree watch
# (see README.md), so only the separate process is checked for notifications.
for watcher in "--watcher process" "--recursive"; do
    echo "== notify_buffer $watcher"
    rc=0
    # shellcheck disable=SC2086 # $watcher holds words
    timeout 120 "$wine" "$here/build/notify_buffer.exe" --files 20 --reps 1 --buffers-kb 16 \
        $watcher >"$work/notify_${watcher//[- ]/}.out" 2>"$work/notify.err" || rc=$?
    sed 's/\r$//' "$work/notify_${watcher//[- ]/}.out" | sed 's/^/    /'
    [[ $rc -eq 0 ]] || { cat "$work/notify.err" >&2; fail "notify_buffer $watcher exited with $rc"; }
done

echo "== printed lines"
python3 "$here/check_lines.py" "$work" || fail "a probe's printed lines differ from the article's"

echo "== JSON lines"
args=()
for probe in "${probes[@]}"; do
    args+=("$probe" "${scenario_ids[$probe]}" "$work/$probe.jsonl" "$work/$probe.out")
done
python3 - "${args[@]}" <<'PY' || fail "JSON check failed"
import json, math, sys

def number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

def check(probe, scenario, json_path, out_path):
    with open(json_path, encoding="utf-8") as f:
        rows = [line for line in f.read().split("\n") if line.strip()]
    assert len(rows) == 1, f"expected 1 JSON line, got {len(rows)}"
    r = json.loads(rows[0])
    for key in ("id", "status", "reason", "affected", "headline", "variants",
                "explanation", "lines", "platform"):
        assert key in r, f"missing field {key!r}"
    assert r["id"] == scenario, f"id {r['id']!r} != {scenario!r}"
    assert r["status"] == "ran", r["status"]
    assert r["platform"] == "windows", r["platform"]
    assert r["reason"] is None or isinstance(r["reason"], str)
    assert r["affected"] in (True, False, None)
    assert isinstance(r["explanation"], str) and r["explanation"]
    h = r["headline"]
    if h is not None:
        assert isinstance(h["metric"], str) and isinstance(h["unit"], str)
        for key in ("pathological", "control", "ratio"):
            assert number(h[key]), f"headline.{key} = {h[key]!r}"
        assert h["ratio"] >= 0
    else:
        assert r["affected"] is None, "a verdict without a headline"
        assert r["reason"], "no headline and no reason"
    variants = r["variants"]
    assert isinstance(variants, list) and variants, "no variants"
    for v in variants:
        assert isinstance(v["name"], str) and v["name"]
        assert v["role"] in ("pathological", "control"), v["role"]
        assert ("points" in v) != ("value" in v), f"{v['name']}: points xor value"
        if "points" in v:
            ns = [p["n"] for p in v["points"]]
            assert ns and all(isinstance(n, int) and n > 0 for n in ns), ns
            assert ns == sorted(set(ns)), f"sizes not increasing: {ns}"
            for p in v["points"]:
                assert len(p["cpu_s"]) == len(p["wall_s"]) >= 1, p
                assert all(number(x) and x >= 0 for x in p["cpu_s"] + p["wall_s"]), p
        else:
            assert number(v["value"]), v
            assert isinstance(v.get("unit"), str), f"{v['name']}: value without unit"
        for key in ("exponent", "exponent_ci", "verdict"):
            assert v.get(key) is None, f"{v['name']}: {key} is for slowlab import"
    with open(out_path, encoding="utf-8", errors="replace") as f:
        printed = [line.rstrip("\r") for line in f.read().split("\n") if line.strip()]
    assert r["lines"] == printed, "JSON lines differ from the printed lines"
    assert printed, "printed nothing"

args = sys.argv[1:]
bad = 0
for i in range(0, len(args), 4):
    probe, scenario, json_path, out_path = args[i:i + 4]
    try:
        check(probe, scenario, json_path, out_path)
        print(f"    {probe}: ok")
    except Exception as error:  # report every probe, then fail
        print(f"    {probe}: {type(error).__name__}: {error}", file=sys.stderr)
        bad += 1
sys.exit(1 if bad else 0)
PY

echo "== slowlab.wprp"
python3 - "$here/slowlab.wprp" <<'PY' || fail "slowlab.wprp check failed"
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "WindowsPerformanceRecorder", root.tag
profiles = root.find("Profiles")
assert profiles is not None, "no <Profiles>"
collectors = {e.get("Id") for e in profiles if e.tag in ("SystemCollector", "EventCollector")}
providers = {e.get("Id") for e in profiles if e.tag in ("SystemProvider", "EventProvider")}
modes = {}
for profile in profiles.findall("Profile"):
    for key in ("Id", "Name", "Description", "LoggingMode", "DetailLevel"):
        assert profile.get(key), f"profile without {key}"
    modes.setdefault(profile.get("Name"), set()).add(profile.get("LoggingMode"))
    for ref in profile.iter():
        if ref.tag in ("SystemCollectorId", "EventCollectorId"):
            assert ref.get("Value") in collectors, f"unknown collector {ref.get('Value')}"
        if ref.tag in ("SystemProviderId", "EventProviderId"):
            assert ref.get("Value") in providers, f"unknown provider {ref.get('Value')}"
assert modes, "no profiles"
for name, seen in modes.items():
    assert seen == {"File", "Memory"}, f"{name}: needs a File and a Memory profile, has {seen}"
stacks = {s.get("Value") for s in root.iter("Stack")}
keywords = {k.get("Value") for k in root.iter("Keyword")}
for needed in ("SampledProfile", "CSwitch", "ReadyThread", "VirtualAllocation"):
    assert needed in stacks and needed in keywords, f"missing {needed}"
# The teardown article's UserCrit lock events and the working-set article's snapshots.
event_providers = {e.get("Id"): e for e in profiles if e.tag == "EventProvider"}
wanted = {"Microsoft-Windows-Win32k": 0x0200000010000000, "Microsoft-Windows-Kernel-Memory": 0xE0}
for name, mask in wanted.items():
    ids = [i for i, e in event_providers.items() if e.get("Name") == name]
    assert ids, f"no EventProvider {name}"
    masks = [int(k.get("Value"), 16) for i in ids for k in event_providers[i].iter("Keyword")]
    assert any(m & mask == mask for m in masks), f"{name}: keywords {masks} lack {mask:#x}"
    for profile in profiles.findall("Profile"):
        used = {r.get("Value") for r in profile.iter("EventProviderId")}
        assert used & set(ids), f"profile {profile.get('Id')} does not record {name}"
print(f"    well-formed; profiles {sorted(modes)}; {len(keywords)} keywords, {len(stacks)} stacks")
PY

if [[ -n ${SLOWLAB_BIN:-} ]]; then
    echo "== slowlab import"
    "$SLOWLAB_BIN" import "$results" || fail "slowlab import rejected the probes' JSON lines"
fi
if [[ -n ${SLOWLAB_PROBE_RESULTS:-} ]]; then
    cp "$results" "$SLOWLAB_PROBE_RESULTS"
fi

echo "PASS: ${#probes[@]} probes built, ran under Wine and wrote valid JSON lines; slowlab.wprp is well-formed ($(( $(date +%s) - started )) s)"
echo "(Wine proves the programs run and report correctly, not the Windows pathologies.)"
