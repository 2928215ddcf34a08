//! Prints a process's events (switches, wake-ups, syscalls, faults) and CPU samples from
//! a recording (eBPF or perf.data), one a line, in time order, with times from the
//! trace's start: what the critical path reads, to see why it read a wait as it did. A
//! development tool; it does no analysis and names no frames.
//!
//!     cargo run --profile test-release -p slowlab-schedrec --example dump_events -- FILE [PID]

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: dump_events FILE [PID]  (the recorded command's pid by default)");
        std::process::exit(2);
    };
    let pid_asked = args.get(1).and_then(|p| p.parse::<i32>().ok());
    let path = std::path::Path::new(path);
    let opts = slowlab_schedrec::ReadOptions::default();
    let read = if slowlab_schedrec::is_sched_file(path) {
        slowlab_schedrec::read_file(path, &opts)
            .map(|(t, _)| t)
            .map_err(|e| e.to_string())
    } else {
        slowlab_perf::read_file(path, &opts.symbols, &|_, _, _| {}).map_err(|e| e.to_string())
    };
    let trace = match read {
        Ok(t) => t,
        Err(e) => {
            eprintln!("dump_events: {e}");
            std::process::exit(1);
        }
    };
    let Some(pid) = pid_asked.or(trace.meta.command_pid) else {
        eprintln!("dump_events: the recording has no command: give a PID");
        std::process::exit(2);
    };
    let tids: Vec<i32> = trace
        .threads
        .iter()
        .filter(|t| trace.processes[t.process.ix()].pid == pid)
        .map(|t| t.tid)
        .collect();
    let start = trace.meta.start_ns;
    let mut lines: Vec<(u64, String)> = Vec::new();
    let s = &trace.samples;
    for i in 0..s.len() {
        let tid = trace.threads[s.thread[i].ix()].tid;
        if tids.contains(&tid) {
            lines.push((s.time_ns[i], format!("cpu{} tid {tid:>6} sample", s.cpu[i])));
        }
    }
    for e in &trace.events {
        let tid = trace.threads[e.thread.ix()].tid;
        let ours = tids.contains(&tid)
            || match &e.kind {
                slowlab_model::trace::EventKind::Switch { next_tid, .. } => tids.contains(next_tid),
                slowlab_model::trace::EventKind::Waking { tid, .. } => tids.contains(tid),
                _ => false,
            };
        if ours {
            lines.push((e.time_ns, format!("cpu{} tid {tid:>6} {:?}", e.cpu, e.kind)));
        }
    }
    lines.sort_by_key(|l| l.0);
    for (time_ns, line) in lines {
        let at = time_ns.saturating_sub(start) as f64 / 1e6;
        println!("{at:12.6} ms {line}");
    }
}
