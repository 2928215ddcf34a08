//! `slowlab diff A B`: reads two traces (perf.data or ETL), compares their
//! sampled CPU with `slowlab_analyze::diff`, prints the table or JSON and
//! writes the differential flame graph. Also writes the interactive page
//! (`--html`). On `slowlab diagnose` directories (`diff A1 A2 … -- B1 B2
//! …` for several runs per side) it first compares their critical paths
//! with `slowlab_analyze::path_diff` and then, on the terminal, the CPU of
//! the first run of each side; `--html` writes both on one page (the paths
//! only, with `--json` or without both traces). Only wiring; the comparisons and their
//! rendering live in `analyze` and `report`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use slowlab_analyze::diff::{diff_view, differential_lines, DiffOptions, Metric, Normalize};
use slowlab_analyze::diff_tree::diff_tree;
use slowlab_analyze::path_diff::diff_paths;
use slowlab_analyze::select::Selection;
use slowlab_cli::diff::DiffArgs;
use slowlab_report::diff_page::{diff_page, DiffPageData, PathsSection};
use slowlab_report::export::flamegraph_svg;
use slowlab_report::path_diff::path_diff_text;
use slowlab_report::write_atomically;

use super::input::{open, open_options};

pub fn run(args: DiffArgs) -> Result<i32> {
    let (a_runs, b_runs) = sides(&args)?;
    let dirs = a_runs.iter().chain(&b_runs).filter(|p| p.is_dir()).count();
    if dirs == 0 {
        if a_runs.len() > 1 || b_runs.len() > 1 {
            bail!("several runs per side are compared by their critical paths: give `slowlab diagnose` directories, not traces");
        }
        return cpu_diff(&args, &a_runs[0], &b_runs[0], None);
    }
    if dirs < a_runs.len() + b_runs.len() {
        bail!("give either traces or `slowlab diagnose` directories, not both");
    }
    let read = |dirs: &[PathBuf]| slowlab_runs::read_runs(dirs).map_err(anyhow::Error::msg);
    let (a, b) = (read(&a_runs)?, read(&b_runs)?);
    let Some(d) = diff_paths(&a, &b) else {
        bail!("nothing to compare");
    };
    for w in &d.warnings {
        eprintln!("slowlab: warning: {w}");
    }
    let label = |runs: &[PathBuf]| match runs {
        [one] => one.display().to_string(),
        many => format!("{} … ({} runs)", many[0].display(), many.len()),
    };
    let (a_label, b_label) = (label(&a_runs), label(&b_runs));
    let section = PathsSection::new(&d, &a, &b);
    // The page of the paths alone, when the CPU part cannot be had.
    let paths_page = |p: &Path| -> Result<()> {
        let page = diff_page(&DiffPageData {
            title: &format!("slowlab diff: {a_label} → {b_label}"),
            a_name: &a_label,
            b_name: &b_label,
            view: None,
            tree: None,
            paths: Some(&section),
        })?;
        write_atomically(p, page.as_bytes())?;
        eprintln!("slowlab: wrote {}", p.display());
        Ok(())
    };
    if args.json {
        if let Some(p) = &args.html {
            paths_page(p)?;
        }
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        serde_json::to_writer_pretty(&mut out, &d)?;
        writeln!(out)?;
        out.flush()?;
        return Ok(0);
    }
    print!("{}", path_diff_text(&d, &a_label, &b_label));
    // The CPU of the first run of each side, as for two traces.
    let (ta, tb) = (a_runs[0].join("trace.data"), b_runs[0].join("trace.data"));
    if ta.is_file() && tb.is_file() {
        // The recordings are system-wide: without a filter of the user's,
        // the root's process (by name) is compared.
        let mut cpu_args = args.clone();
        let only = if cpu_args.selection.filter.is_empty() {
            cpu_args.selection.filter = vec![format!("process={}", d.a.root)];
            format!(", process {}", d.a.root)
        } else {
            String::new()
        };
        println!("\nsampled CPU{only}, {} → {}\n", ta.display(), tb.display());
        std::io::stdout().flush()?;
        if let Err(e) = cpu_diff(&cpu_args, &ta, &tb, Some((&section, &a_label, &b_label))) {
            eprintln!("slowlab: warning: no CPU comparison: {e:#}");
            if let Some(p) = &args.html {
                paths_page(p)?;
            }
        }
    } else {
        if args.flamegraph.is_some() {
            eprintln!(
                "slowlab: warning: no trace.data in both directories: no flame graph written"
            );
        }
        if let Some(p) = &args.html {
            paths_page(p)?;
        }
    }
    Ok(0)
}

/// A's runs and B's: `A B`, or `A1 A2 … -- B1 B2 …`.
fn sides(args: &DiffArgs) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    if args.b_runs.is_empty() {
        match args.inputs.as_slice() {
            [a, b] => Ok((vec![a.clone()], vec![b.clone()])),
            _ => bail!(
                "give A and B, or several runs per side as A1 A2 … -- B1 B2 … (got {} inputs and no --)",
                args.inputs.len()
            ),
        }
    } else {
        Ok((args.inputs.clone(), args.b_runs.clone()))
    }
}

/// Today's comparison of two traces' sampled CPU; `paths` (the path
/// comparison and the sides' names) goes on top of its page.
fn cpu_diff(
    args: &DiffArgs,
    a_path: &Path,
    b_path: &Path,
    paths: Option<(&PathsSection, &str, &str)>,
) -> Result<i32> {
    let key = slowlab_analyze::cpu::parse_key(&args.by)?;
    let normalize: Normalize = args.normalize.parse().map_err(anyhow::Error::msg)?;
    let sel = Selection::parse(
        &args.selection.filter,
        args.selection.from,
        args.selection.to,
    )?;
    let opts = slowlab_open::OpenOptions {
        paths: false,
        cgroups: false,
        ..open_options(&args.symbols)?
    };
    let (a, b) = (open(a_path, &opts)?, open(b_path, &opts)?);
    for (name, bundle) in [(a_path, &a), (b_path, &b)] {
        for w in &bundle.warnings {
            eprintln!("slowlab: warning: {}: {w}", name.display());
        }
    }
    let (a, b) = (a.trace, b.trace);
    let top = if args.json {
        args.top
    } else {
        args.top.or(Some(25))
    };
    // The page filters its rows itself: it gets all of them unless --top
    // says otherwise; the terminal the first 25 by default.
    let options = DiffOptions {
        key,
        normalize,
        metric: if args.inclusive {
            Metric::Inclusive
        } else {
            Metric::SelfSamples
        },
        top: args.top,
    };
    let all_rows = diff_view(&a, &b, &sel, options);
    let (view, page_view) = if args.html.is_some() {
        (all_rows.clone().keep_top(top), Some(all_rows))
    } else {
        (all_rows.keep_top(top), None)
    };
    if view.a.samples == 0 || view.b.samples == 0 {
        eprintln!(
            "slowlab: warning: {} has no samples in the selection: every row is new or vanished",
            if view.a.samples == 0 { a_path } else { b_path }.display()
        );
    }
    // The merged folded stacks, for the flame graph and the page's tree.
    let lines = if args.flamegraph.is_some() || args.html.is_some() {
        differential_lines(&a, &b, &sel)
    } else {
        Vec::new()
    };
    if let Some(p) = &args.flamegraph {
        let title = format!("{} → {}", a_path.display(), b_path.display());
        write_atomically(p, &flamegraph_svg(&lines, &title, "samples")?)?;
        eprintln!("slowlab: wrote differential flame graph {}", p.display());
    }
    if let (Some(p), Some(page_view)) = (&args.html, &page_view) {
        let (a_name, b_name) = match paths {
            Some((_, a, b)) => (a.to_string(), b.to_string()),
            None => (a_path.display().to_string(), b_path.display().to_string()),
        };
        let title = format!("slowlab diff: {a_name} → {b_name}");
        let tree = diff_tree(&lines);
        let page = diff_page(&DiffPageData {
            title: &title,
            a_name: &a_name,
            b_name: &b_name,
            view: Some(page_view),
            tree: Some(&tree),
            paths: paths.map(|(s, _, _)| s),
        })?;
        write_atomically(p, page.as_bytes())?;
        eprintln!("slowlab: wrote {}", p.display());
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.json {
        serde_json::to_writer_pretty(&mut out, &view)?;
        writeln!(out)?;
    } else {
        let text = slowlab_report::diff::diff_text(
            &view,
            &a_path.display().to_string(),
            &b_path.display().to_string(),
        );
        write!(out, "{text}")?;
    }
    out.flush()?;
    Ok(0)
}
