//! Detaching the recorders' programs: each link's detach closes a perf event or a raw
//! tracepoint, and the kernel lets a syscall tracepoint's perf event go only after an RCU
//! grace period (~40 ms here), one at a time. Both recorders (`sched`, `capture`) detach
//! here, at once or in the background. It does not load or attach anything.

use libbpf_rs::Link;

/// Detaches the programs (and closes the perf events their links own) on a thread nobody
/// waits for: the caller's programs must record nothing more by then (a global they check),
/// so that its file can be finished, and `diagnose` analyze it, meanwhile (a `diagnose` of
/// a 0.5 s command answered after 3.2 s waiting for it, 1.4 s without). The process's exit
/// waits for the detaches still going (they run in the kernel, in the exiting threads
/// too), so nothing stays attached after it. Where no thread can be made, they run on
/// this one.
pub(crate) fn detach_in_background(links: Vec<Link>) {
    let detaching = std::thread::Builder::new()
        .name("slowlab-detach".into())
        .spawn(move || detach(links));
    // A refused closure is dropped with the error, and the links with it: detached here.
    drop(detaching);
}

/// Detaches the programs, each on a thread of its own: a tracepoint's detach waits for an
/// RCU grace period, and one after the other the ~40 took 3.6 s on a busy machine, 1.8 s
/// at once (the kernel still lets the syscall tracepoints' perf events go one at a time,
/// ~40 ms each).
pub(crate) fn detach(links: Vec<Link>) {
    std::thread::scope(|scope| {
        for link in links {
            // Where no thread can be made, the refused closure is dropped here, and the
            // link with it: detached on this thread.
            let _ = std::thread::Builder::new().spawn_scoped(scope, move || drop(link));
        }
    });
}
