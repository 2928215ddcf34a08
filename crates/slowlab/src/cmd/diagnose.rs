//! `slowlab diagnose`: record the whole system while a command runs, make
//! the recording's one analysis (the command's critical path, every
//! detector), print the answer first and the findings ranked by what they
//! cost, and write the trace, `critical_path.json`, `findings.json` and a
//! self-contained `report.html` (and the exports asked for) into one
//! directory; with `--repeat N`, N such directories (`slowlab_diagnose::repeat`)
//! and a summary across them (`slowlab_runs::summarize`). The recording and the
//! analysis are `slowlab-diagnose`'s; this is glue.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::path::Path;

use anyhow::Context;
use slowlab_cli::diagnose::DiagnoseArgs;
use slowlab_diagnose::{analyze_into, recording, CommandRuns, Target};
use slowlab_exports::{Export, ParquetOptions};

use super::input::Opener;

pub fn run(args: DiagnoseArgs) -> anyhow::Result<i32> {
    let json = args.json.then(json_only_stdout).transpose()?;
    if let Some(refusal) = args.argument_refusal() {
        anyhow::bail!(refusal);
    }
    let seconds = args.seconds.unwrap_or(10.0);
    if let Some(n) = &args.repeat {
        let n = slowlab_runs::parse_repeat(n).map_err(anyhow::Error::msg)?;
        return repeat(&args, n, json);
    }
    if let Some(pid) = args.pid {
        anyhow::ensure!(
            Path::new(&format!("/proc/{pid}")).is_dir(),
            "no process with pid {pid} is running: give the pid of a running process (`pgrep NAME`)"
        );
    }
    if args.parquet.is_some() {
        slowlab_exports::parquet_available()?;
    }
    if let Some(path) = &args.fxprof {
        slowlab_report::check_writable(path)?;
    }
    let made = !args.output.exists();
    std::fs::create_dir_all(&args.output)
        .with_context(|| format!("cannot create {}", args.output.display()))?;
    let trace_path = args.output.join("trace.data");
    // Attached to a running process: the whole system for the window.
    let recorded = match args.pid {
        Some(_) => vec!["sleep".to_string(), format!("{seconds}")],
        None => args.command.clone(),
    };
    let cfg = recording(trace_path.clone(), args.freq, recorded);
    if let Some(pid) = args.pid {
        eprintln!(
            "slowlab: recording the whole system for {seconds} s for pid {pid} (Ctrl-C ends early)"
        );
    }
    let bpf = super::record::diagnose_with_bpf(args.backend);
    let recorded = slowlab_diagnose::record_with(&cfg, bpf).inspect_err(|_| {
        // Nothing was recorded (a command not found, a full disk): the directory made for
        // it goes too, if nothing else is in it (`remove_dir` takes only an empty one).
        if made {
            let _ = std::fs::remove_dir(&args.output);
        }
    })?;
    let outcome = &recorded.outcome;
    let mut warnings = outcome.warnings.clone();
    let mut extra = Vec::new();
    if let Some(p) = &args.fxprof {
        extra.push((Export::Fxprof, p.clone()));
    }
    if let Some(dir) = &args.parquet {
        extra.push((Export::Parquet(ParquetOptions::default()), dir.clone()));
    }
    let (root, title) = match args.pid {
        Some(pid) => (Target::Pid(pid), vec![format!("pid {pid}")]),
        None => (recorded.target(), args.command.clone()),
    };
    let opener = Opener::new(true)?;
    let report = analyze_into(
        &opener,
        &trace_path,
        &args.output,
        &title,
        root,
        &extra,
        &mut warnings,
    )?;
    let say = |text: &str| {
        if args.json {
            eprint!("{text}");
        } else {
            print!("{text}");
        }
    };
    for w in &warnings {
        say(&format!("warning: {w}\n"));
    }
    say(&report.text);
    let files: Vec<String> = std::iter::once(&trace_path)
        .chain(&report.files)
        .map(|f| f.display().to_string())
        .collect();
    if let Some((last, rest)) = files.split_last() {
        say(&format!("\nwrote {} and {last}\n", rest.join(", ")));
    }
    for line in &report.written {
        say(&format!("{line}\n"));
    }
    if let (Some(pid), true) = (args.pid, report.did_not_run) {
        say(&format!(
            "\npid {pid} did not run at all in the {seconds} s window: it looks hung. Its wait chains now:\n"
        ));
        let every_thread = slowlab_hang::Options { all_threads: true };
        match slowlab_hang::walk(Path::new("/"), pid, &every_thread) {
            Ok(chains) => say(&slowlab_hang::render::text(&chains)),
            Err(e) => say(&format!("cannot walk its wait chains: {e}\n")),
        }
    }
    if let Some(mut json) = json {
        writeln!(json, "{}", report.findings_json)?;
    }
    crate::report_replays();
    Ok(match (args.pid, outcome.stopped_by) {
        (Some(_), Some(sig)) => 128 + sig,
        (Some(_), None) => 0,
        (None, _) => outcome.exit_code,
    })
}

/// With `--json`, standard output carries the JSON alone: the returned file is the
/// original standard output, and descriptor 1 becomes standard error, so that what
/// the command, the recorder or a warning writes there cannot come before the JSON.
fn json_only_stdout() -> anyhow::Result<File> {
    let original = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .context("cannot duplicate standard output")?;
    std::io::stdout().flush()?;
    // SAFETY: dup2 on two descriptors this process has open; Rust's handles
    // for descriptor 1 keep working (they now write to standard error).
    if unsafe { libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) } < 0 {
        return Err(std::io::Error::last_os_error()).context("cannot redirect standard output");
    }
    Ok(File::from(original))
}

/// `--repeat N`: N diagnose runs, then the summary.
fn repeat(args: &DiagnoseArgs, n: usize, json: Option<File>) -> anyhow::Result<i32> {
    // Ctrl-C between runs: the finished runs are kept and summarized.
    let cancel = slowlab_sweep::Cancel::new();
    crate::signals::cancel_on_interrupt(cancel.clone())?;
    let opener = Opener::new(true)?;
    // One backend for every run, so that their times compare; one recording for all.
    let bpf = super::record::diagnose_with_bpf(args.backend);
    let runs = CommandRuns::new(&opener, &args.output, args.freq, bpf);
    let repeated = slowlab_diagnose::repeat(
        runs,
        &args.command,
        &args.output,
        n,
        &|| cancel.is_cancelled(),
        &mut |line| eprintln!("slowlab: {line}"),
    )?;
    for w in repeated.warnings {
        eprintln!("slowlab: warning: {w}");
    }
    let first_failure = repeated.runs.iter().map(|r| r.exit_code).find(|&c| c != 0);
    let summary = slowlab_runs::summarize(&args.command, n, repeated.runs, repeated.interrupted);
    if let Some(mut json) = json {
        eprint!("{}", summary.text());
        writeln!(json, "{}", serde_json::to_string_pretty(&summary)?)?;
    } else {
        print!("{}", summary.text());
    }
    Ok(if repeated.interrupted {
        crate::signals::exit_code()
    } else {
        first_failure.unwrap_or(0)
    })
}
