//! One round of one teardown-lock variant: the monitor started, n holders
//! started (each in a network namespace of its own, or not), killed with
//! one SIGKILL and reaped, then the wait until the lock stays free; and
//! what that measured, the monitor's calls sorted into the phases, and
//! several rounds combined.
//!
//! What it does not do: judge the figures (`verdict` does).

use std::time::Duration;

use super::holders::HolderGroup;
use super::monitor::Monitor;
use super::{Kind, MONITOR_PERIOD, SETTLE};
use crate::{LabContext, LabError};

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

    pub(super) fn merge(&mut self, other: &CallStats) {
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

/// Runs one round of the variant `kind` with `n` holders.
pub(super) fn run_variant(
    ctx: &mut LabContext,
    kind: Kind,
    n: usize,
) -> Result<Measured, LabError> {
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
    // A holder's failure (e.g. no namespace left) is read a few holders later.
    let not_started = |e: std::io::Error| {
        LabError::Failed(format!(
            "cannot start {n} holders{}: {e}",
            match kind {
                Kind::Netns => " in network namespaces of their own",
                Kind::Plain => "",
            }
        ))
    };
    for i in 0..n {
        ctx.check_cancel()?;
        group.spawn(&ctx.self_exe, kind).map_err(not_started)?;
        if i % 100 == 99 {
            ctx.status(&format!("teardown-lock: {} of {n} processes up", i + 1));
        }
    }
    group.wait_ready().map_err(not_started)?;
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
