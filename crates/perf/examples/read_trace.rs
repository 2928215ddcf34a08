//! Reads a perf.data file with `slowlab-perf` and prints how long it took
//! and how big the trace model came out (samples, frames, stacks,
//! functions, modules): the numbers behind `bench/analyze/README.md`.
//! A development tool; it does no analysis.
//!
//!     cargo run --release -p slowlab-perf --example read_trace -- FILE [--no-symbols]

use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: read_trace FILE [--no-symbols]");
        std::process::exit(2);
    };
    let symbolize = args.next().as_deref() != Some("--no-symbols");
    let opts = slowlab_perf::ReadOptions {
        symbolize,
        ..Default::default()
    };
    let t0 = Instant::now();
    let t = match slowlab_perf::read_file(std::path::Path::new(&path), &opts, &|_, _, _| {}) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("read_trace: {e}");
            std::process::exit(1);
        }
    };
    let dt = t0.elapsed();
    println!("read in {:.1} ms", dt.as_secs_f64() * 1e3);
    println!(
        "records {} samples {} events {} frames {} stacks {} functions {} modules {} strings {} threads {} processes {}",
        t.stats.records,
        t.samples.len(),
        t.events.len(),
        t.frames.len(),
        t.stacks.len(),
        t.functions.len(),
        t.modules.len(),
        t.strings.len(),
        t.threads.len(),
        t.processes.len()
    );
    for w in &t.stats.warnings {
        println!("warning: {w}");
    }
}
