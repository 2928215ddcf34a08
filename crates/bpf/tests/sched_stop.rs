//! The scheduler recorder's stop on a real recording (root or CAP_BPF+CAP_PERFMON needed;
//! otherwise `SKIP:`): the recording ends when it is stopped, not when its ~40 programs
//! are detached (each detach waits for an RCU grace period, seconds in all on a busy
//! machine), though records keep coming meanwhile; and it says the machine's CPU time over
//! it (the host's steal).

#[path = "support/sched.rs"]
mod sched_support;
#[path = "support/stop.rs"]
mod stop;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use slowlab_bpf::monotonic_ns;
use slowlab_bpf::sched::{read_sched, SchedOptions, SchedRecorder};

#[test]
fn the_recording_ends_when_stopped_not_when_its_programs_are_detached() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("stop.slr");
    let cpu_before = slowlab_bpf::cpu_times_now();
    let Some(recorder) = sched_support::start_or_skip("recorder stop", || {
        SchedRecorder::start(&out, &SchedOptions::default())
    }) else {
        return;
    };
    // A thread that sleeps a millisecond at a time: switches, wake-ups and detector
    // syscalls for as long as the programs are attached.
    let busy = AtomicBool::new(true);
    let (asked, stopped) = std::thread::scope(|scope| {
        scope.spawn(|| {
            while busy.load(Ordering::Relaxed) {
                let _ = std::fs::metadata(Path::new("/nonexistent/slowlab-stop-test"));
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        std::thread::sleep(Duration::from_millis(300));
        let asked = monotonic_ns();
        let stats = recorder.stop().expect("the stop");
        let stopped = monotonic_ns();
        busy.store(false, Ordering::Relaxed);
        assert!(stats.records > 0, "nothing recorded");
        (asked, stopped)
    });
    let log = read_sched(&out).expect("the recording reads back");
    let last = log
        .records
        .iter()
        .map(|r| r.time_ns)
        .max()
        .expect("records");
    stop::assert_ended_at_the_stop("record", asked, stopped, last);
    // The machine's CPU time over the recording, the host's steal of it: within what the
    // counters counted around it (read before the start and after the stop).
    let around = slowlab_bpf::cpu_times_since(cpu_before).expect("/proc/stat reads here");
    let within = log.cpu_times.expect("a STEAL section");
    assert!(
        within.wanted <= around.wanted && within.stolen <= around.stolen,
        "the recording's {within:?}, around it {around:?}"
    );
}
