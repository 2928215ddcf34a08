//! Golden tests on model snapshots of real recordings: no root, perf or
//! binary needed. Each directory of `tests/snapshots/` holds a recording of
//! one `slowlab lab --trace` run, decoded and symbolized
//! (`bundle.json.gz`, a `TraceBundle`), and the golden outputs computed from
//! it: `findings.json` (the detectors' findings as `lab --trace` computes
//! them, `slowlab_analyze::diagnose` with the run's label as the command),
//! `findings.txt` and `critical-path.txt` (as `slowlab diagnose` prints
//! them), and the text of each `slowlab analyze` view at its default
//! settings (`cpu.txt`, `waits.txt`, `faults.txt`, `procs.txt`,
//! `syscalls.txt`, `timeline.txt`).
//!
//! This test recomputes every output and compares it with its golden file;
//! a difference fails with the first differing lines. With `SLOWLAB_BLESS=1`
//! it rewrites the golden files instead (review them with `git diff`).
//! Making a snapshot is `tests/snapshots/README.md`'s business, not this
//! test's.

use std::io::Read;
use std::path::{Path, PathBuf};

use slowlab_analyze::analysis::{Analysis, Root};
use slowlab_analyze::select::Selection;
use slowlab_analyze::{cpu, faults, procs, syscalls, timeline, waits};
use slowlab_model::bundle::TraceBundle;
use slowlab_report::critical_path::critical_path_text;
use slowlab_report::{cpu_views, trace_views};

/// Set to `1` to rewrite the golden files from what the code computes now.
const BLESS_VAR: &str = "SLOWLAB_BLESS";
const BUNDLE_FILE: &str = "bundle.json.gz";
/// `slowlab analyze`'s defaults on the terminal: rows per level, interval
/// of the rates.
const TOP: usize = 25;
const BUCKET_S: f64 = 1.0;

fn snapshots_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots")
}

/// The snapshot directories (those with a bundle), sorted; an error when
/// there is none, so that a lost directory cannot pass as "nothing to check".
fn snapshot_dirs(root: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(root)
        .map_err(|e| format!("cannot read the snapshot directory {}: {e}", root.display()))?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join(BUNDLE_FILE).is_file())
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        return Err(format!(
            "no snapshot (a directory with {BUNDLE_FILE}) in {}: see its README.md to make one",
            root.display()
        ));
    }
    Ok(dirs)
}

fn load_bundle(file: &Path) -> Result<TraceBundle, String> {
    let gz =
        std::fs::File::open(file).map_err(|e| format!("cannot open {}: {e}", file.display()))?;
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut json)
        .map_err(|e| format!("{} is not gzip: {e}", file.display()))?;
    serde_json::from_slice(&json)
        .map_err(|e| format!("{} is not a TraceBundle: {e}", file.display()))
}

/// Every golden output of a snapshot, by file name. `label` is the run's
/// directory name, which `lab --trace` passes as the command.
fn outputs(bundle: &TraceBundle, label: &str) -> Vec<(&'static str, String)> {
    let trace = &bundle.trace;
    let all = Selection::default();
    let d = Analysis::new(bundle, Root::Command(vec![label.to_string()]));
    let findings = d.findings();
    let findings_json = serde_json::to_string_pretty(findings).expect("findings serialize") + "\n";
    let critical_path = match d.root_path() {
        Ok(rp) => critical_path_text(&rp.path, 8),
        Err(why) => format!("no critical path: {why}\n"),
    };
    vec![
        ("findings.json", findings_json),
        ("findings.txt", trace_views::findings_text(findings)),
        ("critical-path.txt", critical_path),
        (
            "cpu.txt",
            cpu_views::summary_text(&cpu::summary(trace, &all, Some(TOP)), TOP),
        ),
        (
            "waits.txt",
            trace_views::waits_text(
                &waits::waits_view(trace, d.schedule(), &all, Some(TOP)),
                TOP,
                5,
            ),
        ),
        (
            "faults.txt",
            trace_views::faults_text(
                &faults::faults_view(trace, &all, BUCKET_S, Some(10)),
                TOP,
                3,
            ),
        ),
        (
            "procs.txt",
            trace_views::procs_text(&procs::procs_view(trace, &all, BUCKET_S, TOP), TOP),
        ),
        (
            "syscalls.txt",
            trace_views::syscalls_text(
                &syscalls::syscalls_view(
                    trace,
                    d.context().calls(),
                    &all,
                    bundle.paths.as_deref(),
                    5,
                ),
                TOP,
                10,
            ),
        ),
        (
            "timeline.txt",
            trace_views::timeline_text(&timeline::timeline_view(
                trace,
                d.schedule(),
                &all,
                BUCKET_S,
                3,
            )),
        ),
    ]
}

/// Where two texts first differ, as a few numbered lines of each. Written
/// here rather than taken from a diff crate: the first difference is all a
/// reader needs to see what moved, and `git diff` after blessing shows the
/// rest.
fn first_difference(expected: &str, actual: &str) -> Option<String> {
    if expected == actual {
        return None;
    }
    let (want, got): (Vec<&str>, Vec<&str>) =
        (expected.lines().collect(), actual.lines().collect());
    let at = want
        .iter()
        .zip(&got)
        .position(|(w, g)| w != g)
        .unwrap_or(want.len().min(got.len()));
    let show = |lines: &[&str], sign: char| -> String {
        let shown: Vec<String> = lines
            .iter()
            .enumerate()
            .skip(at)
            .take(4)
            .map(|(i, l)| format!("  {sign} {:>5} | {l}\n", i + 1))
            .collect();
        if shown.is_empty() {
            format!("  {sign}       | (ends at line {})\n", lines.len())
        } else {
            shown.concat()
        }
    };
    Some(format!(
        "first difference at line {} (- golden, + now):\n{}{}",
        at + 1,
        show(&want, '-'),
        show(&got, '+')
    ))
}

/// Where `--waits` and the critical path disagree about a thread (both
/// read the one replay, so nowhere): each thread's blocked time in the
/// waits view is the blocked time of its replayed spans, and no blocked
/// segment of the critical path lies where its thread's spans say it ran
/// or was runnable.
fn disagreements(bundle: &TraceBundle, label: &str) -> Vec<String> {
    use slowlab_analyze::states::{SpanState, TidIndex};
    use slowlab_model::critical_path::SegmentState;
    let trace = &bundle.trace;
    let analysis = Analysis::new(bundle, Root::Command(vec![label.to_string()]));
    let states = analysis.states();
    let view = waits::waits_view(trace, analysis.schedule(), &Selection::default(), None);
    let mut problems = Vec::new();
    for t in &view.threads {
        let blocked_ns: u64 = trace
            .threads
            .iter()
            .enumerate()
            .filter(|(_, th)| th.tid == t.tid && trace.processes[th.process.ix()].pid == t.pid)
            .flat_map(|(i, _)| &states.spans[i])
            .filter(|sp| matches!(sp.state, SpanState::Blocked(_)))
            .map(|sp| sp.end_ns - sp.start_ns)
            .sum();
        if (t.blocked_s - blocked_ns as f64 / 1e9).abs() > 1e-9 {
            problems.push(format!(
                "{label}: --waits says tid {} was blocked {} s, its spans {} s",
                t.tid,
                t.blocked_s,
                blocked_ns as f64 / 1e9
            ));
        }
    }
    let Ok(rp) = analysis.root_path() else {
        return problems;
    };
    let tids = TidIndex::new(trace);
    let root_ns = trace.meta.start_ns + (rp.path.root.start_s * 1e9).round() as u64;
    let mut checked = 0;
    for seg in &rp.path.segments {
        if seg.state != SegmentState::Blocked {
            continue;
        }
        let mid = root_ns + ((seg.from_s + seg.to_s) / 2.0 * 1e9) as u64;
        let Some(th) = tids.lookup(seg.tid, mid) else {
            continue;
        };
        checked += 1;
        for sp in states.spans_in(th, mid, mid + 1) {
            if !matches!(sp.state, SpanState::Blocked(_)) {
                problems.push(format!(
                    "{label}: the critical path has tid {} blocked at {:.6} s, its spans say {:?}",
                    seg.tid, seg.from_s, sp.state
                ));
            }
        }
    }
    if checked == 0 && rp.path.breakdown.blocked.total() > 0.0 {
        problems.push(format!(
            "{label}: no blocked segment of the path was checked"
        ));
    }
    problems
}

/// Compares (or, blessing, writes) one snapshot's outputs; the differences
/// found, one message each.
fn check_snapshot(dir: &Path, bless: bool) -> Vec<String> {
    let bundle = match load_bundle(&dir.join(BUNDLE_FILE)) {
        Ok(b) => b,
        Err(e) => return vec![e],
    };
    let label = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut problems = disagreements(&bundle, &label);
    for (name, now) in outputs(&bundle, &label) {
        let golden = dir.join(name);
        if bless {
            if let Err(e) = std::fs::write(&golden, &now) {
                problems.push(format!("cannot write {}: {e}", golden.display()));
            }
            continue;
        }
        match std::fs::read_to_string(&golden) {
            Ok(want) => {
                if let Some(diff) = first_difference(&want, &now) {
                    problems.push(format!("{label}/{name} changed; {diff}"));
                }
            }
            Err(e) => problems.push(format!("{label}/{name}: no golden file ({e})")),
        }
    }
    problems
}

#[test]
fn snapshots_match_their_golden_files() {
    let bless = std::env::var(BLESS_VAR).is_ok_and(|v| v == "1");
    let dirs = snapshot_dirs(&snapshots_root()).unwrap_or_else(|e| panic!("{e}"));
    // Two at a time: the larger bundles take a second or two each to load.
    let problems: Vec<String> = std::thread::scope(|s| {
        let (left, right) = dirs.split_at(dirs.len() / 2);
        let other = s.spawn(|| {
            right
                .iter()
                .flat_map(|d| check_snapshot(d, bless))
                .collect::<Vec<_>>()
        });
        let mut p: Vec<String> = left.iter().flat_map(|d| check_snapshot(d, bless)).collect();
        p.extend(other.join().expect("the checking thread panicked"));
        p
    });
    if bless {
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        eprintln!(
            "blessed {} snapshot(s): review the change with `git diff`",
            dirs.len()
        );
        return;
    }
    assert!(
        problems.is_empty(),
        "{} golden output(s) differ from what the code computes now:\n\n{}\n\n\
         If the change is intended, rewrite the golden files with\n  \
         {BLESS_VAR}=1 cargo test --release -p slowlab --test golden\n\
         and review them with `git diff`.",
        problems.len(),
        problems.join("\n\n")
    );
    eprintln!("{} snapshot(s) match their golden files", dirs.len());
}

#[test]
fn a_missing_or_empty_snapshot_directory_is_an_error() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let missing = tmp.path().join("nope");
    assert!(snapshot_dirs(&missing).unwrap_err().contains("cannot read"));
    // A directory without any bundle is as bad as none.
    std::fs::create_dir(tmp.path().join("no-bundle")).unwrap();
    let err = snapshot_dirs(tmp.path()).unwrap_err();
    assert!(err.contains("no snapshot"), "{err}");
    std::fs::create_dir(tmp.path().join("a")).unwrap();
    std::fs::write(tmp.path().join("a").join(BUNDLE_FILE), b"").unwrap();
    assert_eq!(
        snapshot_dirs(tmp.path()).unwrap(),
        vec![tmp.path().join("a")]
    );
    // And a bundle that is not one is an error, not a panic.
    assert!(load_bundle(&tmp.path().join("a").join(BUNDLE_FILE)).is_err());
}

#[test]
fn the_first_difference_is_shown_with_its_line_number() {
    assert_eq!(first_difference("a\nb\n", "a\nb\n"), None);
    let d = first_difference("a\nb\nc\n", "a\nB\nc\n").unwrap();
    assert!(d.starts_with("first difference at line 2"), "{d}");
    assert!(
        d.contains("-     2 | b") && d.contains("+     2 | B"),
        "{d}"
    );
    // One text longer than the other: the difference is where one ends.
    let d = first_difference("a\n", "a\nextra\n").unwrap();
    assert!(d.contains("line 2") && d.contains("+     2 | extra"), "{d}");
    assert!(d.contains("(ends at line 1)"), "{d}");
    // Only a trailing newline differs.
    assert!(first_difference("a", "a\n").is_some());
}
