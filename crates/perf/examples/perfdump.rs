//! Debug helper: reads a perf.data file and prints what the trace model
//! holds (counts, warnings, the hottest leaf functions). Not part of the CLI.

use std::collections::HashMap;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: perfdump FILE");
        std::process::exit(2);
    };
    let t0 = std::time::Instant::now();
    let trace = match slowlab_perf::read_file(
        path.as_ref(),
        &slowlab_perf::ReadOptions::default(),
        &|_, _, _| {},
    ) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    println!("read in {:?}", t0.elapsed());
    println!(
        "samples {} events {} processes {} threads {} modules {} functions {} frames {} stacks {}",
        trace.samples.len(),
        trace.events.len(),
        trace.processes.len(),
        trace.threads.len(),
        trace.modules.len(),
        trace.functions.len(),
        trace.frames.len(),
        trace.stacks.len()
    );
    println!("meta {:?}", trace.meta);
    println!("stats {:?}", trace.stats);
    let mut self_counts: HashMap<String, u64> = HashMap::new();
    for s in trace.samples.stack.iter().flatten() {
        let f = trace.frame_function(trace.stacks[s.ix()].frame);
        *self_counts
            .entry(format!(
                "{} [{}]",
                trace.function_name(f),
                trace.function_module(f)
            ))
            .or_default() += 1;
    }
    let mut v: Vec<_> = self_counts.into_iter().collect();
    v.sort_by_key(|e| std::cmp::Reverse(e.1));
    for (name, n) in v.iter().take(15) {
        println!("{n:8} {name}");
    }
    let mut kinds: HashMap<String, u64> = HashMap::new();
    for e in &trace.events {
        let k = format!("{:?}", e.kind);
        let k = k.split([' ', '{']).next().unwrap_or("").to_owned();
        *kinds.entry(k).or_default() += 1;
    }
    println!("events by kind {kinds:?}");
}
