//! How commands open their input: the symbol flags they share, the
//! environment read at the edge (`SLOWLAB_THREADS`, `SLOWLAB_MEMORY`,
//! `SLOWLAB_CACHE_DIR`: `slowlab_open::OpenOptions::from_env`), and a
//! progress bar while a trace is read. The reading is `slowlab-open`'s.

use std::path::Path;

use slowlab_cli::shared::SymbolArgs;
use slowlab_diagnose::TraceOpener;
use slowlab_model::bundle::TraceBundle;
use slowlab_open::{OpenError, OpenOptions};

/// The options the symbol flags and the environment ask for.
pub fn open_options(args: &SymbolArgs) -> anyhow::Result<OpenOptions> {
    Ok(OpenOptions {
        symbolize: !args.no_symbols,
        pdb_symbols: args.symbols.clone(),
        ..OpenOptions::from_env(|name| std::env::var_os(name))?
    })
}

/// Opens `input` with a progress bar on stderr.
pub fn open(input: &Path, opts: &OpenOptions) -> anyhow::Result<TraceBundle> {
    Ok(open_with_bar(input, opts)?)
}

fn open_with_bar(input: &Path, opts: &OpenOptions) -> Result<TraceBundle, OpenError> {
    crate::progress::while_reading(|progress| slowlab_open::open(input, opts, progress))
}

/// Opens what `diagnose`, `doctor`, `lab --trace` and `export` recorded:
/// with its side files, symbols unless told not to, the environment's
/// options, a progress bar.
pub struct Opener {
    opts: OpenOptions,
}

impl Opener {
    pub fn new(symbolize: bool) -> anyhow::Result<Opener> {
        Ok(Opener {
            opts: OpenOptions {
                symbolize,
                ..OpenOptions::from_env(|name| std::env::var_os(name))?
            },
        })
    }
}

impl TraceOpener for Opener {
    fn open(&self, input: &Path) -> Result<TraceBundle, OpenError> {
        open_with_bar(input, &self.opts)
    }
}

/// Opens `input` with its side files and symbols, as `diagnose`, `doctor`
/// and `export` read what they recorded.
pub fn open_all(input: &Path, symbolize: bool) -> anyhow::Result<TraceBundle> {
    Ok(Opener::new(symbolize)?.open(input)?)
}
