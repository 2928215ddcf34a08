//! teardown-lock: tearing down many network namespaces at once holds the
//! global rtnl lock, and an unrelated program that needs the lock stalls.
//!
//! The Windows original: processes that loaded a GUI library serialize their
//! teardown on one global lock; 1,000 of them exiting together freeze
//! anything else that needs it. Ordinary process exit is not serialized on
//! Linux; network namespaces are: their cleanup runs in one kernel worker
//! that holds the rtnl mutex. So N holder processes (`__child
//! teardown-holder`, the slowlab binary waiting to be killed), each in its
//! own network namespace (`unshare(CLONE_NEWNET)`, made by the holder before
//! it says it is ready), are started in one process group and killed
//! together with one SIGKILL. Meanwhile a monitor thread (SCHED_FIFO where allowed, so that
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
//!
//! The files: `holders` (the holder processes, one group, killed and
//! reaped), `monitor` (the thread timing SIOCGIFCONF calls), `variant` (one
//! round of one variant and what it measured), `verdict` (lines and
//! verdict), `tests`.

mod holders;
mod monitor;
#[cfg(test)]
mod tests;
mod variant;
mod verdict;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use slowlab_model::results::{Role, ScenarioResult};

use crate::runner::Scenario;
use crate::{system, LabContext, LabError, Profile};

pub use variant::{combine, stats_between, CallStats, Measured, Sample};
pub use verdict::{judge, seconds, variant_lines};

use variant::run_variant;
use verdict::verdict_line;

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

/// The monitor calls the ioctl this often. A stall shorter than the period
/// can fall between two calls: at 10 ms a 100-namespace run once saw no
/// stall at all (39 µs at most, against 54 µs without namespaces), so the
/// period is short enough for the few-millisecond holds of small runs; a
/// call costs ~2 µs.
const MONITOR_PERIOD: Duration = Duration::from_millis(2);
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
    /// teardown-lock: die with the thread that started it (PR_SET_PDEATHSIG; gone at
    /// once if its process `parent` already is), make a network namespace of its own with
    /// --netns, say `ready` on stdout (or the error), then wait until killed.
    TeardownHolder {
        /// The pid of the process that started it.
        #[arg(long)]
        parent: i32,
        #[arg(long)]
        netns: bool,
    },
}

/// The holder's arguments: started by the process `parent`, with a network namespace of
/// its own for [`Kind::Netns`].
pub fn holder_args(parent: libc::pid_t, kind: Kind) -> Vec<String> {
    let mut args = vec![
        "teardown-holder".into(),
        "--parent".into(),
        parent.to_string(),
    ];
    if kind == Kind::Netns {
        args.push("--netns".into());
    }
    args
}

/// Runs a child program of this scenario.
pub fn child_main(child: Child) -> Result<(), LabError> {
    match child {
        Child::TeardownHolder { parent, netns } => {
            let made = system::die_with_parent(parent).and_then(|()| {
                // SAFETY: unshare has no memory-safety preconditions.
                if netns && unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
            // The one line its starter reads before it closes the pipe.
            let said = match &made {
                Ok(()) => "ready\n".to_string(),
                Err(e) => format!("{e}\n"),
            };
            let mut out = std::io::stdout();
            let _ = out.write_all(said.as_bytes()).and_then(|()| out.flush());
            made.map_err(|e| LabError::io("the teardown-lock holder could not start", e))?;
            loop {
                // SAFETY: pause has no preconditions; the holder ends by SIGKILL.
                unsafe { libc::pause() };
            }
        }
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

    fn preflight(&self, ctx: &LabContext) -> Result<(), LabError> {
        let n = holders(ctx.profile) as u64;
        if !Path::new("/proc/self/ns/net").exists() {
            return Err(LabError::Unsuitable(
                "this kernel has no network namespaces (CONFIG_NET_NS)".into(),
            ));
        }
        if let Some(max) = system::max_net_namespaces() {
            if max < n + 10 {
                return Err(LabError::Unsuitable(format!(
                    "user.max_net_namespaces is {max}, too low for {n} namespaces; raise it with \
                     `sysctl user.max_net_namespaces={}`",
                    (n + 100).next_power_of_two()
                )));
            }
        }
        if let Some(headroom) = system::process_headroom() {
            if headroom < n + 200 {
                return Err(LabError::Unsuitable(format!(
                    "only {headroom} more processes may start here (pid, thread or pids-cgroup \
                     limit), {n} holders and some slack are needed; raise the limit or use --tiny"
                )));
            }
        }
        let needed = n * BYTES_PER_HOLDER + (256 << 20);
        if let Some(available) = system::available_memory() {
            if available < needed {
                return Err(LabError::Unsuitable(format!(
                    "{} MiB of memory available, {} MiB needed for {n} holder processes; free \
                     some memory or use --tiny",
                    available >> 20,
                    needed >> 20
                )));
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
    pub(super) fn title(self) -> &'static str {
        match self {
            Kind::Netns => "Each in its own network namespace",
            Kind::Plain => "Plain processes (control)",
        }
    }

    pub(super) fn variant_name(self) -> &'static str {
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
