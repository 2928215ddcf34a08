//! `slowlab diff A B`: reads two traces (perf.data or ETL), compares their
//! sampled CPU with `slowlab_analyze::diff`, prints the table or JSON and
//! writes the differential flame graph. Only wiring; the comparison and its
//! rendering live in `analyze` and `report`. Also writes the interactive
//! page (`--html`).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use slowlab_analyze::diff::{diff_view, differential_lines, DiffOptions, Metric, Normalize};
use slowlab_analyze::diff_tree::diff_tree;
use slowlab_analyze::select::Selection;
use slowlab_report::diff_page::{diff_page, DiffPageData};
use slowlab_report::export::flamegraph_svg;
use slowlab_report::write_atomically;

use super::input::{open, SymbolArgs};

/// Compare the sampled CPU of two traces: what grew, what shrank.
///
/// Rows (functions by default) are matched by name (and module) across the
/// traces and ranked by the change of their cost: the most grown first, the
/// most shrunk last. Costs are normalised
/// before comparing: as a share of each trace's samples (--normalize total,
/// the default: what grew relative to the rest), or as samples per second
/// of each trace (--normalize duration: what grew in absolute terms).
/// Rows found in one trace only are marked (new) or (vanished). The same
/// filters and time range apply to both traces.
///
/// Examples:
///
///   slowlab diff small.data big.data                 which function grew
///   slowlab diff a.data b.data --by module --top 10
///   slowlab diff a.data b.data --filter process=prog --inclusive
///   slowlab diff a.data b.data --flamegraph diff.svg  red grew, blue shrank
///   slowlab diff a.data b.data --html diff.html       explore it in a browser
///   slowlab diff a.data b.data --json | jq '.functions[0]'
///
/// JSON: {"key","normalize","metric","a":{"samples","duration_s"},"b":{…},
///        "omitted_rows","functions":[{"name","module","a","b","delta","ratio",
///        "a_samples","b_samples","status"}]}, sorted by delta, largest first.
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct DiffArgs {
    /// The baseline trace (perf.data, .etl or .etl.zip)
    pub a: PathBuf,
    /// The trace compared with it
    pub b: PathBuf,
    /// Compare by function, module, process or thread (by name)
    #[arg(long, default_value = "function", value_name = "KEY")]
    pub by: String,
    /// How costs are made comparable: total (share of samples) or duration
    /// (samples per second)
    #[arg(long, default_value = "total", value_name = "HOW")]
    pub normalize: String,
    /// Compare inclusive costs (the function anywhere on the stack) instead
    /// of self costs (the innermost frame)
    #[arg(long)]
    pub inclusive: bool,
    /// Keep the N rows that grew most (default 25 on the terminal, all in
    /// JSON)
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// Only samples of process=NAME, pid=N or tid=N, in both traces
    #[arg(long, value_name = "process=NAME|pid=N|tid=N")]
    pub filter: Vec<String>,
    /// Only samples from this many seconds after each trace's start
    #[arg(long, value_name = "SECONDS")]
    pub from: Option<f64>,
    /// Only samples before this many seconds after each trace's start
    #[arg(long, value_name = "SECONDS")]
    pub to: Option<f64>,
    /// Write a differential flame graph: B's stacks, coloured by the change
    /// of their share from A (red grew, blue shrank)
    #[arg(long, value_name = "FILE.svg")]
    pub flamegraph: Option<PathBuf>,
    /// Write one self-contained interactive page: the rows, sortable and
    /// filterable, and a differential flame graph to zoom and search
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
    /// Print the comparison as JSON on stdout
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub symbols: SymbolArgs,
}

pub fn run(args: DiffArgs) -> Result<i32> {
    let key = slowlab_analyze::cpu::parse_key(&args.by)?;
    let normalize: Normalize = args.normalize.parse().map_err(anyhow::Error::msg)?;
    let sel = Selection::parse(&args.filter, args.from, args.to)?;
    let opts = slowlab_open::OpenOptions {
        paths: false,
        cgroups: false,
        ..args.symbols.options()?
    };
    let (a, b) = (open(&args.a, &opts)?, open(&args.b, &opts)?);
    for (name, bundle) in [(&args.a, &a), (&args.b, &b)] {
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
            if view.a.samples == 0 {
                &args.a
            } else {
                &args.b
            }
            .display()
        );
    }
    // The merged folded stacks, for the flame graph and the page's tree.
    let lines = if args.flamegraph.is_some() || args.html.is_some() {
        differential_lines(&a, &b, &sel)
    } else {
        Vec::new()
    };
    if let Some(p) = &args.flamegraph {
        let title = format!("{} → {}", args.a.display(), args.b.display());
        write_atomically(p, &flamegraph_svg(&lines, &title, "samples")?)?;
        eprintln!("slowlab: wrote differential flame graph {}", p.display());
    }
    if let (Some(p), Some(page_view)) = (&args.html, &page_view) {
        let (a_name, b_name) = (args.a.display().to_string(), args.b.display().to_string());
        let title = format!("slowlab diff: {a_name} → {b_name}");
        let tree = diff_tree(&lines);
        let page = diff_page(&DiffPageData {
            title: &title,
            a_name: &a_name,
            b_name: &b_name,
            view: page_view,
            tree: &tree,
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
            &args.a.display().to_string(),
            &args.b.display().to_string(),
        );
        write!(out, "{text}")?;
    }
    out.flush()?;
    Ok(0)
}
