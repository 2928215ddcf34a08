//! `slowlab lab`: pick scenarios and a size profile, run them with progress
//! on stderr and their lines on stdout, print the verdict table, write the
//! JSON Lines and HTML reports.

use std::io::Write;

use anyhow::Context;
use slowlab_cli::lab::LabArgs;
use slowlab_diagnose::LabTracer;
use slowlab_lab::runner::{select, trace_lab};
use slowlab_lab::{run_lab, LabContext, Profile};
use slowlab_model::results::TraceCheck;
use slowlab_report::lab::{checks_table, json_lines, profiles_summary, render_verdicts_within};
use slowlab_report::{check_writable, write_atomically};
use slowlab_sweep::Cancel;

use super::input::Opener;
use crate::progress::LabProgress;
use crate::signals::cancel_on_interrupt;

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
    for path in [&args.json, &args.html].into_iter().flatten() {
        check_writable(path)?;
    }

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
            crate::signals::exit_code()
        } else if failed {
            1
        } else {
            0
        });
    }
    if let Some(dir) = &args.trace {
        let opener = Opener::new(true)?;
        let bpf = super::record::diagnose_with_bpf(args.backend);
        let mut tracer = LabTracer::new(&opener, dir, args.trace_freq, bpf)
            .map_err(|e| anyhow::anyhow!("cannot create --trace {}: {e}", dir.display()))?;
        let checks = trace_lab(&scenarios, &mut ctx, &mut tracer);
        output.finish();
        print_table(&checks_table(&checks), json_to_stdout);
        for warning in tracer.finish() {
            eprintln!("slowlab: lab --trace: {warning}");
        }
        if let Some(path) = &args.json {
            write_atomically(path, &json_lines(&checks)?)?;
        }
        // A run that could not be recorded or analyzed fails its check, as the table says.
        let failed = checks.iter().any(TraceCheck::failed);
        return Ok(if cancel.is_cancelled() {
            crate::signals::exit_code()
        } else if failed {
            1
        } else {
            0
        });
    }
    let results = run_lab(&scenarios, &mut ctx);
    output.finish();

    // The table fits the terminal it goes to; to a file or a pipe, whole.
    let term = if json_to_stdout {
        console::Term::stderr()
    } else {
        console::Term::stdout()
    };
    let width = term.size_checked().map(|(_, cols)| usize::from(cols));
    print_table(&render_verdicts_within(&results, width), json_to_stdout);
    if let Some(path) = &args.json {
        write_atomically(path, &json_lines(&results)?)?;
    }
    if let Some(path) = &args.html {
        write_atomically(path, slowlab_report::html::lab_page(&results).as_bytes())?;
    }
    Ok(if cancel.is_cancelled() {
        crate::signals::exit_code()
    } else {
        0
    })
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
