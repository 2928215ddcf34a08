//! Prints the events of an eBPF recording's process (switches, wake-ups, syscalls, faults)
//! one a line, in time order, with times from the trace's start: what the critical path
//! reads, to see why it read a wait as it did. A development tool; it does no analysis
//! and names no frames.
//!
//!     cargo run --profile test-release -p slowlab-schedrec --example dump_events -- FILE PID

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(path), Some(pid)) = (
        args.first(),
        args.get(1).and_then(|p| p.parse::<i32>().ok()),
    ) else {
        eprintln!("usage: dump_events FILE PID");
        std::process::exit(2);
    };
    let opts = slowlab_schedrec::ReadOptions::default();
    let (trace, _) = match slowlab_schedrec::read_file(std::path::Path::new(path), &opts) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("dump_events: {e}");
            std::process::exit(1);
        }
    };
    let tids: Vec<i32> = trace
        .threads
        .iter()
        .filter(|t| trace.processes[t.process.ix()].pid == pid)
        .map(|t| t.tid)
        .collect();
    let start = trace.meta.start_ns;
    for e in &trace.events {
        let tid = trace.threads[e.thread.ix()].tid;
        let ours = tids.contains(&tid)
            || match &e.kind {
                slowlab_model::trace::EventKind::Switch { next_tid, .. } => tids.contains(next_tid),
                slowlab_model::trace::EventKind::Waking { tid, .. } => tids.contains(tid),
                _ => false,
            };
        if ours {
            let at = (e.time_ns - start) as f64 / 1e6;
            println!("{at:12.6} ms cpu{} tid {tid:>6} {:?}", e.cpu, e.kind);
        }
    }
}
