//! `slowlab export TRACE… --parquet DIR`: opens each trace with its side
//! files, makes its analysis (every detector), and writes one run of the
//! fleet tables under DIR, atomically (`slowlab_exports::ParquetRun`). Glue
//! only.

use anyhow::Context;
use slowlab_analyze::analysis::{Analysis, Root};
use slowlab_cli::export::ExportArgs;
use slowlab_exports::{ParquetOptions, ParquetRun};

use super::input::open_all;

pub fn run(args: ExportArgs) -> anyhow::Result<i32> {
    let opts = ParquetOptions {
        host: args.host.clone(),
        run: args.run.clone(),
    };
    // Bad partition names fail before any trace is read.
    let mut run = ParquetRun::new(&opts)?;
    for path in &args.traces {
        let bundle = open_all(path, !args.no_symbols)?;
        for w in &bundle.warnings {
            eprintln!("slowlab: warning: {}: {w}", path.display());
        }
        let analysis = Analysis::new(&bundle, Root::Default);
        run.add(&path.display().to_string(), &analysis)
            .with_context(|| format!("cannot export {}", path.display()))?;
    }
    let line = run
        .write(&args.parquet)
        .with_context(|| format!("cannot export to {}", args.parquet.display()))?;
    eprintln!("slowlab: {line}");
    Ok(0)
}
