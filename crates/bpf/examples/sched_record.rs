//! Records the scheduler with eBPF while a command runs and prints what the recording
//! holds: `cargo run --example sched_record -- OUT CMD [ARGS…]` (root). With
//! `SCHED_RING=BYTES` the ring buffer is that small (to see lost records counted).

use std::path::Path;
use std::process::Command;

use slowlab_bpf::sched::{read_sched, SchedOptions, SchedRecorder};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (out, cmd) = args
        .split_first()
        .ok_or("usage: sched_record OUT CMD [ARGS…]")?;
    let mut options = SchedOptions::default();
    if let Ok(ring) = std::env::var("SCHED_RING") {
        options.ring_bytes = ring.parse()?;
    }
    let rec = SchedRecorder::start(Path::new(out), &options)?;
    let status = Command::new(&cmd[0]).args(&cmd[1..]).status()?;
    let stats = rec.stop()?;
    eprintln!("{status}; {stats:?}");
    let log = read_sched(Path::new(out))?;
    let mut kinds = std::collections::BTreeMap::new();
    for r in &log.records {
        *kinds.entry(format!("{:?}", r.kind)).or_insert(0u64) += 1;
    }
    eprintln!(
        "{kinds:?}; {} threads, {} maps, {} stacks; end {:?}; warnings {:?}",
        log.threads.len(),
        log.maps.len(),
        log.stacks.len(),
        log.end,
        log.warnings
    );
    Ok(())
}
