//! `slowlab import`: read results written by the Windows probes (or by
//! `slowlab lab --json`), complete the growth statistics they leave to
//! slowlab, and render them like `slowlab lab`: each scenario's lines, the
//! sweep statistics, the verdict table, and the JSON/HTML exports.

use anyhow::Context;
use slowlab_cli::import::ImportArgs;
use slowlab_lab::verdicts::{complete, parse_results};
use slowlab_report::format;
use slowlab_report::lab::{json_lines, render_verdicts};
use slowlab_report::write_atomically;

pub fn run(args: ImportArgs) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let mut results =
        parse_results(&text).map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;
    anyhow::ensure!(
        !results.is_empty(),
        "{} holds no scenario results",
        args.file.display()
    );
    for r in &mut results {
        complete(r);
    }

    let to_stdout = args.json.as_deref() == Some(std::path::Path::new("-"));
    let mut out = String::new();
    for r in &results {
        out.push_str(&format!("== {} ({})\n", r.id, r.platform));
        for line in &r.lines {
            out.push_str(line);
            out.push('\n');
        }
        for v in r.variants.iter().filter(|v| v.points.is_some()) {
            out.push_str(&format!(
                "  {}: {} — {}\n",
                v.name,
                format::exponent(v.exponent, v.exponent_ci),
                v.verdict.map_or("no verdict", |x| x.as_str())
            ));
        }
    }
    out.push('\n');
    out.push_str(&render_verdicts(&results));
    if to_stdout {
        eprint!("{out}");
    } else {
        print!("{out}");
    }
    if let Some(path) = &args.json {
        write_atomically(path, &json_lines(&results)?)?;
    }
    if let Some(path) = &args.html {
        write_atomically(path, slowlab_report::html::lab_page(&results).as_bytes())?;
    }
    Ok(0)
}
