//! teardown-lock: tearing down many network namespaces at once holds the
//! global rtnl lock, and an unrelated program that needs the lock stalls.
//!
//! The Windows original: processes that loaded a GUI library serialize their
//! teardown on one global lock; 1,000 of them exiting together freeze
//! anything else that needs it. Ordinary process exit is not serialized on
//! Linux; network namespaces are: their cleanup runs in one kernel worker
//! that holds the rtnl mutex. So N holder processes (`__child
//! teardown-holder`, the slowlab binary waiting to be killed), each in its
//! own network namespace made before it runs (`unshare(CLONE_NEWNET)` after
//! fork), are started in one process group and killed together with one
//! SIGKILL. Meanwhile a monitor thread (SCHED_FIFO where allowed, so that
//! ordinary scheduling delays do not look like lock waits) calls the
//! SIOCGIFCONF ioctl, which takes rtnl, every 10 ms during creation and
//! destruction, and after the last holder is reaped until the lock has been
//! free for a while. Control: the same holders without namespaces. The two
//! variants run in alternating rounds (how long the kernel holds the lock
//! varies from round to round); the verdict compares their worst stalls.
//!
//! What it does not do: name the lock from a trace (that is `slowlab
//! record`'s job) or touch any namespace but its own holders'. The holders
//! are one process group, killed on every exit path by a `Cleanup` guard,
//! and also die with the thread that started them (PR_SET_PDEATHSIG).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use slowlab_model::results::{Headline, Role, ScenarioResult, ScenarioStatus, Variant};
use slowlab_sweep::Cancel;

use crate::cleanup::Cleanup;
use crate::measure::value_variant;
use crate::runner::Scenario;
use crate::{system, LabContext, LabError, Profile};

pub struct TeardownLock;

/// `lab --trace`: rounds of the pathological variant at most, and the
/// monitor stalls during destruction that end them: the longest, and all of
/// them summed over the rounds. Under tracing the detector sees somewhat
/// less lock wait than the monitor measures (the call's own time and its
/// scheduling delay are in the monitor's figure), so these sit well above
/// the detector's thresholds.
const TRACE_ROUNDS: usize = 5;
const TRACE_MIN_STALL_S: f64 = 0.03;
const TRACE_MIN_TOTAL_STALL_S: f64 = 0.06;

/// The monitor calls the ioctl this often.
const MONITOR_PERIOD: Duration = Duration::from_millis(10);
/// A call slower than this counts as a stall when waiting for the end.
const STALL_THRESHOLD: Duration = Duration::from_millis(1);
/// The namespace cleanup is over when no call stalled for this long.
const QUIET_PERIOD: Duration = Duration::from_millis(500);
/// Time between "all up" and the kill, so the phases stay apart.
const SETTLE: Duration = Duration::from_millis(100);
/// Affected when the pathological maximum stall is this many times the
/// control's and at least `MIN_STALL_S` (two tiny numbers make no stall).
const AFFECTED_RATIO: f64 = 10.0;
const MIN_STALL_S: f64 = 0.001;
/// Memory per holder process with its namespace, for the guard rail
/// (measured here: 1,000 of them took 343 MiB; rounded up generously).
const BYTES_PER_HOLDER: u64 = 1 << 20;
/// SIOCGIFCONF from <linux/sockios.h>.
const SIOCGIFCONF: libc::c_ulong = 0x8912;

/// The child programs of this scenario (`slowlab __child …`).
#[derive(clap::Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum Child {
    /// teardown-lock: wait until killed (the network namespace, if any, was
    /// made between fork and exec).
    TeardownHolder,
}

/// The holder's arguments.
pub fn holder_args() -> Vec<String> {
    vec!["teardown-holder".into()]
}

/// Runs a child program of this scenario.
pub fn child_main(child: Child) -> Result<(), String> {
    match child {
        Child::TeardownHolder => loop {
            // SAFETY: pause has no preconditions; the holder ends by SIGKILL.
            unsafe { libc::pause() };
        },
    }
}

impl Scenario for TeardownLock {
    fn id(&self) -> &'static str {
        "teardown-lock"
    }

    fn summary(&self) -> &'static str {
        "network-namespace teardown holds the global rtnl lock: a monitor that needs it stalls"
    }

    fn needs_root(&self) -> bool {
        true
    }

    fn detector(&self) -> &'static str {
        "serialized-teardown"
    }

    fn run_for_trace(&self, ctx: &mut LabContext, role: Role) -> Result<(), LabError> {
        let kind = match role {
            Role::Pathological => Kind::Netns,
            Role::Control => Kind::Plain,
        };
        // The quick size at least: fewer namespaces stall too briefly to
        // tell apart from scheduling noise.
        let n = holders(ctx.profile).max(holders(Profile::Quick));
        // How long rtnl is held per teardown batch varies from run to run
        // (more so under tracing): repeat the pathological variant, up to
        // TRACE_ROUNDS times, until the monitor itself saw clear stalls
        // while the namespaces were torn down — the trace must hold the
        // pathology for its detector to be judged.
        let mut destruction = CallStats::default();
        for _ in 0..TRACE_ROUNDS {
            let m = run_variant(ctx, kind, n)?;
            destruction.merge(&m.during_destruction);
            if kind == Kind::Plain || enough_for_trace(&destruction) || ctx.cancel.is_cancelled() {
                break;
            }
        }
        Ok(())
    }

    fn preflight(&self, ctx: &LabContext) -> Result<(), String> {
        let n = holders(ctx.profile) as u64;
        if !Path::new("/proc/self/ns/net").exists() {
            return Err("this kernel has no network namespaces (CONFIG_NET_NS)".into());
        }
        if let Some(max) = system::max_net_namespaces() {
            if max < n + 10 {
                return Err(format!(
                    "user.max_net_namespaces is {max}, too low for {n} namespaces; raise it with \
                     `sysctl user.max_net_namespaces={}`",
                    (n + 100).next_power_of_two()
                ));
            }
        }
        if let Some(headroom) = system::process_headroom() {
            if headroom < n + 200 {
                return Err(format!(
                    "only {headroom} more processes may start here (pid, thread or pids-cgroup \
                     limit), {n} holders and some slack are needed; raise the limit or use --tiny"
                ));
            }
        }
        let needed = n * BYTES_PER_HOLDER + (256 << 20);
        if let Some(available) = system::available_memory() {
            if available < needed {
                return Err(format!(
                    "{} MiB of memory available, {} MiB needed for {n} holder processes; free \
                     some memory or use --tiny",
                    available >> 20,
                    needed >> 20
                ));
            }
        }
        Ok(())
    }

    fn run(&self, ctx: &mut LabContext) -> Result<ScenarioResult, LabError> {
        let n = holders(ctx.profile);
        let rounds = rounds(ctx.profile);
        let (mut plain, mut netns) = (Vec::new(), Vec::new());
        for round in 1..=rounds {
            // The control first in each round, on a machine with no
            // namespace cleanup pending.
            for kind in [Kind::Plain, Kind::Netns] {
                ctx.check_cancel()?;
                let m = run_variant(ctx, kind, n)?;
                ctx.line(format!(
                    "{}, {n} processes, round {round} of {rounds}:",
                    kind.title()
                ));
                for line in variant_lines(&m) {
                    ctx.line(format!("  {line}"));
                }
                match kind {
                    Kind::Plain => plain.push(m),
                    Kind::Netns => netns.push(m),
                }
            }
        }
        let (control, pathological) = match (combine(&plain), combine(&netns)) {
            (Some(c), Some(p)) => (c, p),
            _ => return Err(LabError::Failed("no round was measured".into())),
        };
        let judged = judge(n, &pathological, &control);
        ctx.line(verdict_line(&pathological, &control));
        if !control.realtime {
            ctx.line(
                "  (the monitor could not run SCHED_FIFO: the control includes scheduling delays)",
            );
        }
        Ok(judged)
    }
}

fn holders(profile: Profile) -> usize {
    profile.pick(100, 1000, 1000)
}

/// Rounds of each variant, alternating. How long the kernel worker holds
/// the lock for the same number of namespaces varies from round to round
/// (on the 2-core test machine, one round in four or five stayed under a
/// few milliseconds while the others stalled the monitor 30–160 ms), so the
/// verdict takes the worst stall of several rounds, for both variants alike.
fn rounds(profile: Profile) -> usize {
    profile.pick(2, 3, 5)
}

/// With or without a network namespace per holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Netns,
    Plain,
}

impl Kind {
    fn title(self) -> &'static str {
        match self {
            Kind::Netns => "Each in its own network namespace",
            Kind::Plain => "Plain processes (control)",
        }
    }

    fn variant_name(self) -> &'static str {
        match self {
            Kind::Netns => "netns-holders",
            Kind::Plain => "plain-holders",
        }
    }
}

/// Whether the monitor's calls during destruction, over the rounds so far,
/// stalled enough for a trace to show the pathology.
fn enough_for_trace(destruction: &CallStats) -> bool {
    destruction.max_s >= TRACE_MIN_STALL_S && destruction.total_s >= TRACE_MIN_TOTAL_STALL_S
}

/// The monitor's calls in one stretch of time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CallStats {
    pub calls: usize,
    /// Time spent inside the call, summed.
    pub total_s: f64,
    pub max_s: f64,
}

impl CallStats {
    fn add(&mut self, duration_s: f64) {
        self.calls += 1;
        self.total_s += duration_s;
        self.max_s = self.max_s.max(duration_s);
    }

    fn merge(&mut self, other: &CallStats) {
        self.calls += other.calls;
        self.total_s += other.total_s;
        self.max_s = self.max_s.max(other.max_s);
    }
}

/// What one variant measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub kind: Kind,
    pub n: usize,
    /// From the first fork until every holder runs with its namespace.
    pub creation_s: f64,
    /// From the SIGKILL until the last holder is reaped.
    pub destruction_s: f64,
    /// From the last reap until the monitor saw the lock free for good.
    pub tail_s: f64,
    /// Every monitor call, from the first fork to the end of the tail.
    pub all: CallStats,
    pub during_creation: CallStats,
    /// From the SIGKILL to the end of the tail.
    pub during_destruction: CallStats,
    /// Whether the monitor ran SCHED_FIFO.
    pub realtime: bool,
    /// The wait for the lock to stay free hit its limit.
    pub tail_timed_out: bool,
    /// The maximum stall of each round.
    pub round_max_s: Vec<f64>,
}

/// Several rounds of one variant as one: mean creation and destruction
/// times, the monitor's calls of all rounds together (so the maximum is the
/// worst round's). `None` for no rounds.
pub fn combine(rounds: &[Measured]) -> Option<Measured> {
    let (first, rest) = rounds.split_first()?;
    let mut m = first.clone();
    for r in rest {
        m.creation_s += r.creation_s;
        m.destruction_s += r.destruction_s;
        m.tail_s = m.tail_s.max(r.tail_s);
        m.all.merge(&r.all);
        m.during_creation.merge(&r.during_creation);
        m.during_destruction.merge(&r.during_destruction);
        m.realtime &= r.realtime;
        m.tail_timed_out |= r.tail_timed_out;
        m.round_max_s.extend(&r.round_max_s);
    }
    m.creation_s /= rounds.len() as f64;
    m.destruction_s /= rounds.len() as f64;
    Some(m)
}

/// One monitor call: when it started (since the monitor's origin) and how
/// long it took, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub start_s: f64,
    pub duration_s: f64,
}

/// Sums the samples that started in `[from_s, to_s)`.
pub fn stats_between(samples: &[Sample], from_s: f64, to_s: f64) -> CallStats {
    let mut stats = CallStats::default();
    for s in samples
        .iter()
        .filter(|s| s.start_s >= from_s && s.start_s < to_s)
    {
        stats.add(s.duration_s);
    }
    stats
}

fn run_variant(ctx: &mut LabContext, kind: Kind, n: usize) -> Result<Measured, LabError> {
    let mut monitor = Monitor::start()?;
    // Let the monitor settle (and fail early if the ioctl does not work).
    std::thread::sleep(5 * MONITOR_PERIOD);
    monitor.check()?;

    ctx.status(&format!(
        "teardown-lock: starting {n} {}",
        match kind {
            Kind::Netns => "processes with a network namespace each",
            Kind::Plain => "plain processes",
        }
    ));
    let t_create = monitor.now_s();
    let mut group = HolderGroup::new(ctx.cancel.clone());
    for i in 0..n {
        ctx.check_cancel()?;
        group.spawn(&ctx.self_exe, kind).map_err(|e| {
            LabError::Failed(format!(
                "cannot start holder {} of {n}{}: {e}",
                i + 1,
                match kind {
                    Kind::Netns => " in a new network namespace",
                    Kind::Plain => "",
                }
            ))
        })?;
        if i % 100 == 99 {
            ctx.status(&format!("teardown-lock: {} of {n} processes up", i + 1));
        }
    }
    let t_up = monitor.now_s();
    std::thread::sleep(SETTLE);
    ctx.check_cancel()?;

    ctx.status(&format!("teardown-lock: killing {n} processes"));
    let t_kill = monitor.now_s();
    let reaped = group.kill_and_reap();
    let t_reaped = monitor.now_s();
    if reaped != n {
        return Err(LabError::Failed(format!(
            "{reaped} of {n} holders were reaped after the kill"
        )));
    }
    ctx.status("teardown-lock: waiting for the kernel to finish the cleanup");
    let limit = Duration::from_secs(5) + Duration::from_millis(5) * n as u32;
    let tail_timed_out = !monitor.wait_quiet(t_reaped, limit, &ctx.cancel);
    ctx.check_cancel()?;
    let t_end = monitor.now_s();
    let (samples, realtime) = monitor.stop()?;
    let all = stats_between(&samples, t_create, f64::INFINITY);
    Ok(Measured {
        kind,
        n,
        creation_s: t_up - t_create,
        destruction_s: t_reaped - t_kill,
        tail_s: t_end - t_reaped,
        all,
        round_max_s: vec![all.max_s],
        during_creation: stats_between(&samples, t_create, t_up),
        during_destruction: stats_between(&samples, t_kill, f64::INFINITY),
        realtime,
        tail_timed_out,
    })
}

/// Seconds with three significant digits (at least three decimals):
/// `1.234`, `0.231`, `0.0412`, `0.0000213`.
pub fn seconds(s: f64) -> String {
    let decimals = if s > 0.0 && s.is_finite() {
        (2 - s.log10().floor() as i32).clamp(3, 9) as usize
    } else {
        3
    };
    format!("{s:.decimals$}")
}

/// The lines of the original program for one variant.
pub fn variant_lines(m: &Measured) -> Vec<String> {
    let per = |s: f64| s * 1000.0 / m.n.max(1) as f64;
    let mut lines = vec![
        format!(
            "Process creation took {} s ({:.3} ms per process).",
            seconds(m.creation_s),
            per(m.creation_s)
        ),
        format!(
            "Process destruction took {} s ({:.3} ms per process).",
            seconds(m.destruction_s),
            per(m.destruction_s)
        ),
        format!(
            "Monitor blocked for {} s total, maximum was {} s.",
            seconds(m.all.total_s),
            seconds(m.all.max_s)
        ),
    ];
    if m.tail_timed_out {
        lines.push(format!(
            "(the monitor still saw stalls {} s after the last process was reaped; gave up waiting)",
            seconds(m.tail_s)
        ));
    }
    lines
}

fn verdict_line(pathological: &Measured, control: &Measured) -> String {
    let rounds = pathological.round_max_s.len();
    format!(
        "Maximum monitor stall {} s with network namespaces, {} s without{}: {:.0} times as long.",
        seconds(pathological.all.max_s),
        seconds(control.all.max_s),
        if rounds > 1 {
            format!(" (worst of {rounds} rounds each)")
        } else {
            String::new()
        },
        ratio(pathological.all.max_s, control.all.max_s)
    )
}

fn ratio(pathological: f64, control: f64) -> f64 {
    pathological / control.max(1e-9)
}

/// Verdict: affected when the maximum stall with namespaces is at least
/// `AFFECTED_RATIO` times the control's and at least `MIN_STALL_S`.
pub fn judge(n: usize, pathological: &Measured, control: &Measured) -> ScenarioResult {
    let r = ratio(pathological.all.max_s, control.all.max_s);
    let affected = r >= AFFECTED_RATIO && pathological.all.max_s >= MIN_STALL_S;
    let explanation = if affected {
        format!(
            "tearing down {n} network namespaces holds the global rtnl lock: an rtnl call stalled up to {} s ({} s during creation), vs {} s with plain processes",
            seconds(pathological.all.max_s),
            seconds(pathological.during_creation.max_s),
            seconds(control.all.max_s),
        )
    } else {
        format!(
            "{n} network namespaces were torn down without stalling an rtnl call much (maximum {} s vs {} s with plain processes)",
            seconds(pathological.all.max_s),
            seconds(control.all.max_s),
        )
    };
    ScenarioResult {
        id: "teardown-lock".into(),
        status: ScenarioStatus::Ran,
        reason: None,
        affected: Some(affected),
        headline: Some(Headline {
            metric: format!("maximum monitor stall (SIOCGIFCONF, needs rtnl), {n} processes"),
            unit: "s".into(),
            pathological: pathological.all.max_s,
            control: control.all.max_s,
            ratio: r,
        }),
        variants: vec![
            variant(pathological, Role::Pathological),
            variant(control, Role::Control),
        ],
        explanation,
        lines: Vec::new(),
        platform: "linux".into(),
    }
}

fn variant(m: &Measured, role: Role) -> Variant {
    let mut v = value_variant(m.kind.variant_name(), role, m.all.max_s, "s");
    let per_round: Vec<String> = m.round_max_s.iter().map(|&s| seconds(s)).collect();
    v.note = Some(format!(
        "maximum monitor stall of {} rounds (per round: {} s); mean creation {} s, mean destruction {} s, \
         cleanup after the last reap up to {} s; monitor: {} calls, {} s in total, maximum {} s during \
         creation and {} s during destruction{}{}",
        per_round.len(),
        per_round.join(", "),
        seconds(m.creation_s),
        seconds(m.destruction_s),
        seconds(m.tail_s),
        m.all.calls,
        seconds(m.all.total_s),
        seconds(m.during_creation.max_s),
        seconds(m.during_destruction.max_s),
        if m.realtime { "" } else { "; monitor not SCHED_FIFO" },
        if m.tail_timed_out { "; the wait for the end of the cleanup timed out" } else { "" },
    ));
    v
}

/// The holder processes: one process group, killed and reaped by the guard
/// on every exit path unless `kill_and_reap` did it first.
struct HolderGroup {
    /// The group id, 0 before the first holder and after the reap.
    pgid: Arc<AtomicI32>,
    count: usize,
    cancel: Cancel,
    _guard: Cleanup,
}

impl HolderGroup {
    fn new(cancel: Cancel) -> Self {
        let pgid = Arc::new(AtomicI32::new(0));
        let guard_pgid = Arc::clone(&pgid);
        let guard_cancel = cancel.clone();
        HolderGroup {
            pgid,
            count: 0,
            cancel,
            _guard: Cleanup::register("kill the teardown-lock holders", move || {
                let group = guard_pgid.swap(0, Ordering::SeqCst);
                if group > 0 {
                    guard_cancel.clear_running_group();
                    slowlab_sweep::cancel::kill_group(group);
                    reap_group(group, usize::MAX, Duration::from_secs(10));
                }
            }),
        }
    }

    fn spawn(&mut self, exe: &Path, kind: Kind) -> std::io::Result<()> {
        let parent = std::process::id() as libc::pid_t;
        let mut command = Command::new(exe);
        command
            .arg("__child")
            .args(holder_args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(self.pgid.load(Ordering::SeqCst));
        let netns = kind == Kind::Netns;
        // SAFETY: the closure runs between fork and exec and only makes
        // async-signal-safe system calls; it allocates nothing.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                if netns && libc::unshare(libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn()?;
        let pid = child.id() as libc::pid_t;
        if self.count == 0 {
            self.pgid.store(pid, Ordering::SeqCst);
            self.cancel.set_running_group(pid);
        }
        self.count += 1;
        Ok(())
    }

    /// One SIGKILL to the group, then waits for every holder; returns how
    /// many were reaped.
    fn kill_and_reap(&mut self) -> usize {
        let group = self.pgid.load(Ordering::SeqCst);
        if group <= 0 {
            return 0;
        }
        slowlab_sweep::cancel::kill_group(group);
        self.cancel.clear_running_group();
        let reaped = reap_group(group, self.count, Duration::from_secs(60));
        if reaped == self.count {
            self.pgid.store(0, Ordering::SeqCst);
        }
        reaped
    }
}

/// Reaps children of group `group` until `expected` were reaped, none is
/// left, or `limit` passed; returns how many.
fn reap_group(group: libc::pid_t, expected: usize, limit: Duration) -> usize {
    let deadline = Instant::now() + limit;
    let mut reaped = 0;
    while reaped < expected {
        let mut status = 0;
        // SAFETY: waits only for our own children in the holders' group.
        let rc = unsafe { libc::waitpid(-group, &mut status, libc::WNOHANG) };
        if rc > 0 {
            reaped += 1;
            continue;
        }
        if rc < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break; // ECHILD: none left
        }
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    reaped
}

/// The monitor's samples and whether it ran SCHED_FIFO, or why it failed.
type MonitorResult = Result<(Vec<Sample>, bool), String>;

/// The monitor thread and what it publishes while it runs.
struct Monitor {
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
    fn start() -> Result<Self, LabError> {
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

    fn now_s(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }

    /// An error if the monitor thread has already failed.
    fn check(&mut self) -> Result<(), LabError> {
        if !self.shared.failed.load(Ordering::SeqCst) {
            return Ok(());
        }
        let message = match self.handle.take().map(|h| h.join()) {
            Some(Ok(Err(message))) => message,
            _ => "the monitor thread failed".into(),
        };
        Err(LabError::Failed(message))
    }

    /// Waits until no call stalled for `QUIET_PERIOD` after `since_s`;
    /// false when `limit` passed first. Returns early on cancellation.
    fn wait_quiet(&self, since_s: f64, limit: Duration, cancel: &Cancel) -> bool {
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
    fn stop(mut self) -> Result<(Vec<Sample>, bool), LabError> {
        self.shared.stop.store(true, Ordering::SeqCst);
        match self.handle.take().map(|h| h.join()) {
            Some(Ok(Ok(result))) => Ok(result),
            Some(Ok(Err(message))) => Err(LabError::Failed(message)),
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
        return Err(format!(
            "cannot open a socket for the monitor: {}",
            std::io::Error::last_os_error()
        ));
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
        outcome.map_err(|e| format!("the SIOCGIFCONF ioctl failed: {e}"))?;
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
fn list_interfaces(socket: &std::os::fd::OwnedFd) -> std::io::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(kind: Kind, max_s: f64) -> Measured {
        let stats = CallStats {
            calls: 300,
            total_s: max_s * 3.0,
            max_s,
        };
        Measured {
            kind,
            n: 1000,
            creation_s: 2.5,
            destruction_s: 0.125,
            tail_s: 0.6,
            all: stats,
            during_creation: CallStats::default(),
            during_destruction: stats,
            realtime: true,
            tail_timed_out: false,
            round_max_s: vec![max_s],
        }
    }

    #[test]
    fn rounds_combine_into_means_and_the_worst_stall() {
        let mut a = measured(Kind::Netns, 0.1);
        a.creation_s = 2.0;
        let mut b = measured(Kind::Netns, 0.002);
        b.creation_s = 4.0;
        b.tail_timed_out = true;
        let m = combine(&[a, b]).unwrap();
        assert_eq!(m.creation_s, 3.0);
        assert_eq!(m.all.max_s, 0.1);
        assert_eq!(m.all.calls, 600);
        assert_eq!(m.round_max_s, vec![0.1, 0.002]);
        assert!(m.tail_timed_out);
        assert!(combine(&[]).is_none());
        let line = verdict_line(&m, &measured(Kind::Plain, 0.0001));
        assert_eq!(
            line,
            "Maximum monitor stall 0.100 s with network namespaces, 0.000100 s without \
             (worst of 2 rounds each): 1000 times as long."
        );
    }

    #[test]
    fn the_lines_match_the_original_program() {
        let lines = variant_lines(&measured(Kind::Netns, 0.231));
        assert_eq!(
            lines,
            vec![
                "Process creation took 2.500 s (2.500 ms per process).",
                "Process destruction took 0.125 s (0.125 ms per process).",
                "Monitor blocked for 0.693 s total, maximum was 0.231 s.",
            ]
        );
    }

    #[test]
    fn seconds_keep_three_significant_digits() {
        assert_eq!(seconds(1.2345), "1.234");
        assert_eq!(seconds(0.0412), "0.0412");
        assert_eq!(seconds(0.0000213), "0.0000213");
        assert_eq!(seconds(0.0), "0.000");
        assert_eq!(seconds(12.5), "12.500");
    }

    #[test]
    fn affected_when_the_stall_is_long_and_many_times_the_control() {
        let r = judge(
            1000,
            &measured(Kind::Netns, 0.2),
            &measured(Kind::Plain, 0.00002),
        );
        assert_eq!(r.affected, Some(true));
        let h = r.headline.unwrap();
        assert!((h.ratio - 10_000.0).abs() < 1e-6, "{}", h.ratio);
        assert_eq!(r.variants[0].name, "netns-holders");
        assert_eq!(r.variants[0].role, Role::Pathological);
        assert_eq!(r.variants[1].role, Role::Control);
        assert_eq!(r.variants[0].value, Some(0.2));
    }

    #[test]
    fn a_large_ratio_of_tiny_stalls_is_not_a_stall() {
        let r = judge(
            100,
            &measured(Kind::Netns, 0.0005),
            &measured(Kind::Plain, 0.00001),
        );
        assert_eq!(r.affected, Some(false));
        let r = judge(
            100,
            &measured(Kind::Netns, 0.05),
            &measured(Kind::Plain, 0.01),
        );
        assert_eq!(r.affected, Some(false));
    }

    #[test]
    fn stats_count_only_the_calls_in_the_window() {
        let samples = [
            Sample {
                start_s: 0.0,
                duration_s: 0.5,
            },
            Sample {
                start_s: 1.0,
                duration_s: 0.1,
            },
            Sample {
                start_s: 2.0,
                duration_s: 0.2,
            },
        ];
        let s = stats_between(&samples, 1.0, 2.5);
        assert_eq!(s.calls, 2);
        assert!((s.total_s - 0.3).abs() < 1e-12);
        assert_eq!(s.max_s, 0.2);
    }

    #[test]
    fn the_ioctl_works_here() {
        // SAFETY: as in monitor_calls.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0);
        // SAFETY: fresh descriptor.
        let socket = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        list_interfaces(&socket).unwrap();
    }
}
