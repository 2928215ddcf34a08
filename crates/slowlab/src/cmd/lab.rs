//! `slowlab lab`: pick scenarios and a size profile, run them with progress
//! on stderr and their lines on stdout, print the verdict table, write the
//! JSON Lines and HTML reports.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use slowlab_lab::runner::{select, trace_lab};
use slowlab_lab::{run_lab, LabContext, Profile};
use slowlab_report::lab::{checks_table, json_lines, profiles_summary, render_verdicts_within};
use slowlab_report::write_atomically;
use slowlab_sweep::Cancel;

use slowlab_diagnose::LabTracer;

use super::input::Opener;
use crate::progress::LabProgress;
use crate::signals::cancel_on_interrupt;

/// Reproduce the five operating-system pathologies as measured experiments.
///
/// Each scenario runs a pathological and a control variant side by side on
/// this machine and says whether the machine is affected, and by how much:
///
///   topdown-alloc    top-down placement searching from the top: O(n²)
///   notify-buffer    file-change watchers: buffer size, permission events
///   log-probe        log names found by probing name.0, name.1, …: O(N²)
///   teardown-lock    network-namespace teardown holding the global rtnl lock
///   working-set-cap  scanning 64 MiB inside a 32 MiB memory cgroup
///
/// Scenarios that need root (namespaces, cgroups, mounts, fanotify) are
/// skipped with the reason when run without it. Everything a scenario
/// creates is removed when it ends, fails or is interrupted (Ctrl-C).
///
/// Examples:
///
///   slowlab lab                          all five at quick sizes (< 3 min)
///   slowlab lab log-probe --full         the original experiment's sizes
///   slowlab lab --json lab.jsonl --html lab.html
///   slowlab lab --trace traces           record each variant once and check
///                                        that its detector names the culprit
///   slowlab lab --profile                sweep each growing pathological
///                                        variant under perf and name the
///                                        function where the growth lives
///
/// --profile samples the call stacks of topdown-alloc's and log-probe's
/// pathological children at every size (perf, cpu-clock, frame pointers),
/// fits each function's cost as `slowlab sweep --profile` does, and ends
/// with one line per scenario, e.g.
///
///   topdown-alloc    topdown-probe (superlinear, whole run N^1.98 [1.95–2.02]):
///                    `FUNCTION` (MODULE) grows as N^2.0 … and is 40% of the
///                    cost at n=4000
///
/// Kernel functions are named when kallsyms is readable (root); without root
/// perf samples only the children's user space (perf_event_paranoid ≤ 2).
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct LabArgs {
    /// Scenarios to run (all when none is given); see --list
    #[arg(value_name = "SCENARIO")]
    scenarios: Vec<String>,

    /// Small sizes: all five in under 3 minutes (the default)
    #[arg(long, conflicts_with_all = ["full", "tiny"])]
    quick: bool,

    /// The sizes of the original experiments, within time budgets
    #[arg(long, conflicts_with = "tiny")]
    full: bool,

    /// Tiny sizes for tests: seconds per scenario, effects not always visible
    #[arg(long, hide = true)]
    tiny: bool,

    /// List the scenarios and exit
    #[arg(long)]
    list: bool,

    /// Write one JSON object per scenario per line (JSON Lines; `-` for stdout)
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// Write a self-contained HTML report
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,

    /// Instead of measuring: record one run of each variant system-wide into
    /// DIR/SCENARIO-VARIANT/ and check that the scenario's detector fires on
    /// the pathological trace and stays silent on the control's (needs root
    /// and perf). Exit code 1 when a check fails.
    #[arg(long, value_name = "DIR")]
    trace: Option<PathBuf>,

    /// Samples per second per CPU of --trace recordings
    #[arg(long, default_value_t = 1000, requires = "trace", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    trace_freq: u32,

    /// Instead of the verdicts: sweep each growing scenario's pathological
    /// variant under perf and name the function where its cost grows (needs
    /// perf; kernel functions need root)
    #[arg(long, conflicts_with = "trace")]
    profile: bool,

    /// Samples per second of CPU time with --profile
    #[arg(long, default_value_t = slowlab_profile::DEFAULT_FREQUENCY_HZ, requires = "profile", value_name = "HZ")]
    profile_freq: u32,

    /// Directory for temporary files (default: $TMPDIR or /tmp)
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
}

pub fn run(args: LabArgs) -> anyhow::Result<i32> {
    if args.list {
        for scenario in slowlab_lab::runner::all() {
            let root = if scenario.needs_root() {
                " (needs root)"
            } else {
                ""
            };
            println!("{:<16} {}{root}", scenario.id(), scenario.summary());
        }
        return Ok(0);
    }
    let scenarios = select(&args.scenarios).map_err(anyhow::Error::msg)?;
    let profile = if args.full {
        Profile::Full
    } else if args.tiny {
        Profile::Tiny
    } else {
        Profile::Quick
    };
    let json_to_stdout = args.json.as_deref() == Some(std::path::Path::new("-"));

    let cancel = Cancel::new();
    cancel_on_interrupt(cancel.clone())?;
    let self_exe = std::env::current_exe().context("cannot find the slowlab binary itself")?;
    let mut output = LabProgress::new(json_to_stdout);
    let mut ctx = LabContext::new(profile, self_exe, cancel.clone(), &mut output);
    if let Some(dir) = &args.work_dir {
        anyhow::ensure!(
            dir.is_dir(),
            "--work-dir {} is not a directory",
            dir.display()
        );
        ctx.work_root = dir.clone();
    }
    if args.profile {
        slowlab_profile::PerfWrapper::new(args.profile_freq, Some(&ctx.work_root))?.check()?;
        let profiles = slowlab_profile::lab::profile_lab(
            &scenarios,
            &mut ctx,
            args.profile_freq,
            &slowlab_report::sweep::render_functions,
        );
        output.finish();
        print_table(&profiles_summary(&profiles), json_to_stdout);
        if let Some(path) = &args.json {
            write_atomically(path, &json_lines(&profiles)?)?;
        }
        let failed = profiles
            .iter()
            .any(|p| p.reason.as_deref().is_some_and(|r| r.starts_with("failed")));
        return Ok(if cancel.is_cancelled() {
            130
        } else if failed {
            1
        } else {
            0
        });
    }
    if let Some(dir) = &args.trace {
        let opener = Opener::new(true)?;
        let mut tracer = LabTracer::new(&opener, dir, args.trace_freq)
            .map_err(|e| anyhow::anyhow!("cannot create --trace {}: {e}", dir.display()))?;
        let checks = trace_lab(&scenarios, &mut ctx, &mut tracer);
        output.finish();
        print_table(&checks_table(&checks), json_to_stdout);
        if let Some(path) = &args.json {
            write_atomically(path, &json_lines(&checks)?)?;
        }
        let failed = checks.iter().any(|c| c.fired.is_some() && !c.passed());
        return Ok(if cancel.is_cancelled() {
            130
        } else if failed {
            1
        } else {
            0
        });
    }
    let results = run_lab(&scenarios, &mut ctx);
    output.finish();

    let fd = if json_to_stdout {
        libc::STDERR_FILENO
    } else {
        libc::STDOUT_FILENO
    };
    print_table(
        &render_verdicts_within(&results, terminal_width(fd)),
        json_to_stdout,
    );
    if let Some(path) = &args.json {
        write_atomically(path, &json_lines(&results)?)?;
    }
    if let Some(path) = &args.html {
        write_atomically(path, slowlab_report::html::lab_page(&results).as_bytes())?;
    }
    Ok(if cancel.is_cancelled() { 130 } else { 0 })
}

/// The result table goes to stdout, or to stderr when stdout carries JSON.
fn print_table(table: &str, json_to_stdout: bool) {
    if json_to_stdout {
        eprint!("\n{table}");
    } else {
        print!("\n{table}");
        std::io::stdout().flush().ok();
    }
}

/// The width of the terminal on `fd`; `None` when it is not a terminal
/// (the table is then printed whole, for files and pipes).
fn terminal_width(fd: libc::c_int) -> Option<usize> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the struct we pass; a
    // descriptor that is not a terminal makes it fail without writing.
    let ok = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(size.ws_col as usize)
}
