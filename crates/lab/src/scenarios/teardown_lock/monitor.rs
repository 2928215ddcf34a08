//! teardown-lock's monitor: a thread (SCHED_FIFO where allowed) that calls
//! the SIOCGIFCONF ioctl, which takes the rtnl lock, every
//! `MONITOR_PERIOD`, timing each call, and publishes whether a call is
//! stalled now and when the last stall ended, so that the scenario can wait
//! until the lock has been free for `QUIET_PERIOD`.
//!
//! What it does not do: decide what a stall means, or name the lock.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use slowlab_sweep::Cancel;

use super::variant::Sample;
use super::{MONITOR_PERIOD, QUIET_PERIOD, SIOCGIFCONF, STALL_THRESHOLD};
use crate::LabError;

/// The monitor's samples and whether it ran SCHED_FIFO, or why it failed.
type MonitorResult = Result<(Vec<Sample>, bool), LabError>;

/// The monitor thread and what it publishes while it runs.
pub(super) struct Monitor {
    origin: Instant,
    shared: Arc<MonitorShared>,
    handle: Option<std::thread::JoinHandle<MonitorResult>>,
}

struct MonitorShared {
    stop: AtomicBool,
    failed: AtomicBool,
    /// Nanoseconds since origin when the running call started, u64::MAX
    /// between calls.
    call_started_ns: AtomicU64,
    /// Nanoseconds since origin when the last stalled call ended.
    last_stall_end_ns: AtomicU64,
}

impl Monitor {
    pub(super) fn start() -> Result<Self, LabError> {
        let origin = Instant::now();
        let shared = Arc::new(MonitorShared {
            stop: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            call_started_ns: AtomicU64::new(u64::MAX),
            last_stall_end_ns: AtomicU64::new(0),
        });
        let thread_shared = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("rtnl-monitor".into())
            .spawn(move || monitor_loop(origin, &thread_shared))
            .map_err(|e| LabError::io("cannot start the monitor thread", e))?;
        Ok(Monitor {
            origin,
            shared,
            handle: Some(handle),
        })
    }

    pub(super) fn now_s(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }

    /// An error if the monitor thread has already failed.
    pub(super) fn check(&mut self) -> Result<(), LabError> {
        if !self.shared.failed.load(Ordering::SeqCst) {
            return Ok(());
        }
        Err(match self.handle.take().map(|h| h.join()) {
            Some(Ok(Err(e))) => e,
            _ => LabError::Failed("the monitor thread failed".into()),
        })
    }

    /// Waits until no call stalled for `QUIET_PERIOD` after `since_s`;
    /// false when `limit` passed first. Returns early on cancellation.
    pub(super) fn wait_quiet(&self, since_s: f64, limit: Duration, cancel: &Cancel) -> bool {
        let deadline = Instant::now() + limit;
        let quiet_ns = QUIET_PERIOD.as_nanos() as u64;
        let since_ns = (since_s * 1e9) as u64;
        loop {
            if cancel.is_cancelled() || self.shared.failed.load(Ordering::SeqCst) {
                return true;
            }
            let now_ns = self.origin.elapsed().as_nanos() as u64;
            let started = self.shared.call_started_ns.load(Ordering::SeqCst);
            let in_stall = started != u64::MAX
                && now_ns.saturating_sub(started) > STALL_THRESHOLD.as_nanos() as u64;
            let last_stall = self
                .shared
                .last_stall_end_ns
                .load(Ordering::SeqCst)
                .max(since_ns);
            if !in_stall && now_ns.saturating_sub(last_stall) >= quiet_ns {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(MONITOR_PERIOD);
        }
    }

    /// Stops the thread; its samples and whether it ran SCHED_FIFO.
    pub(super) fn stop(mut self) -> Result<(Vec<Sample>, bool), LabError> {
        self.shared.stop.store(true, Ordering::SeqCst);
        match self.handle.take().map(|h| h.join()) {
            Some(Ok(Ok(result))) => Ok(result),
            Some(Ok(Err(e))) => Err(e),
            _ => Err(LabError::Failed("the monitor thread panicked".into())),
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// The monitor: SIOCGIFCONF every `MONITOR_PERIOD` until told to stop.
fn monitor_loop(origin: Instant, shared: &MonitorShared) -> MonitorResult {
    let result = monitor_calls(origin, shared);
    if result.is_err() {
        shared.failed.store(true, Ordering::SeqCst);
    }
    result
}

fn monitor_calls(origin: Instant, shared: &MonitorShared) -> MonitorResult {
    let realtime = make_realtime();
    // SAFETY: socket(2) with constant arguments; the fd is owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(LabError::last_os("cannot open a socket for the monitor"));
    }
    // SAFETY: fd is a fresh descriptor that nothing else owns.
    let socket = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let mut samples = Vec::with_capacity(8192);
    let mut next = Instant::now();
    while !shared.stop.load(Ordering::SeqCst) {
        let start = Instant::now();
        let started_ns = start.duration_since(origin).as_nanos() as u64;
        shared.call_started_ns.store(started_ns, Ordering::SeqCst);
        let outcome = list_interfaces(&socket);
        let end = Instant::now();
        shared.call_started_ns.store(u64::MAX, Ordering::SeqCst);
        outcome.map_err(|e| LabError::io("the SIOCGIFCONF ioctl failed", e))?;
        let duration = end - start;
        if duration > STALL_THRESHOLD {
            shared.last_stall_end_ns.store(
                end.duration_since(origin).as_nanos() as u64,
                Ordering::SeqCst,
            );
        }
        samples.push(Sample {
            start_s: start.duration_since(origin).as_secs_f64(),
            duration_s: duration.as_secs_f64(),
        });
        next += MONITOR_PERIOD;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    Ok((samples, realtime))
}

/// SCHED_FIFO for the calling thread; false when not allowed.
fn make_realtime() -> bool {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: pthread_self is always valid; param is a plain struct.
    unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) == 0 }
}

/// `struct ifconf` of <net/if.h>.
#[repr(C)]
struct IfConf {
    len: libc::c_int,
    buf: *mut libc::c_char,
}

/// The SIOCGIFCONF ioctl: lists the interfaces of this network namespace
/// under the rtnl lock.
pub(super) fn list_interfaces(socket: &std::os::fd::OwnedFd) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut buf = [0 as libc::c_char; 40 * 32];
    let mut conf = IfConf {
        len: buf.len() as libc::c_int,
        buf: buf.as_mut_ptr(),
    };
    // SAFETY: conf points at a buffer of conf.len bytes that outlives the call.
    let rc = unsafe { libc::ioctl(socket.as_raw_fd(), SIOCGIFCONF as _, &mut conf) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
