//! The CPU time a virtual machine's host kept from it (steal time: the host ran other work
//! on the CPUs this machine wanted to run on), from the text of `/proc/stat`'s `cpu` line,
//! and the warning a recording carries when it was a noticeable share of an interval: the
//! recorded times then include waits for the host that no trace of this machine shows (a
//! CPU with no samples and no events for milliseconds, a thread "running" that made no
//! progress). Parses and judges only; the recorders read `/proc/stat` ([`PROC_STAT`]) at
//! the ends of what they record.

/// Where the kernel gives the machine's CPU time counters.
pub const PROC_STAT: &str = "/proc/stat";

/// The machine's CPU time counters, in clock ticks (`USER_HZ`), from `/proc/stat`'s `cpu`
/// line; or, from [`CpuTimes::since`], what they counted in an interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// Time the CPUs worked or the host kept them: all but idle and iowait.
    pub wanted: u64,
    /// Of which the host kept (steal).
    pub stolen: u64,
}

/// Steal below this share of the time the CPUs wanted is not said: a few percent are
/// common on a shared host and move no conclusion.
const WORTH_SAYING: f64 = 0.05;

/// Nor less than this many clock ticks (30 ms at the usual 100 a second): a short
/// command's share of one or two ticks is noise.
const MIN_TICKS: u64 = 3;

impl CpuTimes {
    /// From the text of `/proc/stat`: user, nice, system, idle, iowait, irq, softirq and
    /// steal, the first eight columns of its `cpu` line (guest time is counted in user
    /// time already). `None` without such a line (a kernel before 2.6.11 has no steal).
    pub fn parse(proc_stat: &str) -> Option<CpuTimes> {
        let line = proc_stat.lines().find(|l| l.starts_with("cpu "))?;
        let f: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .take(8)
            .map(|v| v.parse().ok())
            .collect::<Option<_>>()?;
        let [user, nice, system, _idle, _iowait, irq, softirq, steal] = f[..] else {
            return None;
        };
        Some(CpuTimes {
            wanted: user + nice + system + irq + softirq + steal,
            stolen: steal,
        })
    }

    /// What the counters counted from `before` to these; `None` when they went back (the
    /// two readings are not of one boot).
    pub fn since(self, before: CpuTimes) -> Option<CpuTimes> {
        Some(CpuTimes {
            wanted: self.wanted.checked_sub(before.wanted)?,
            stolen: self.stolen.checked_sub(before.stolen)?,
        })
    }

    /// The warning for an interval's times (from [`CpuTimes::since`]), when its steal is
    /// worth saying.
    pub fn steal_warning(self) -> Option<String> {
        if self.stolen < MIN_TICKS || (self.stolen as f64) < WORTH_SAYING * self.wanted as f64 {
            return None;
        }
        Some(format!(
            "the host kept {:.0}% of the CPU time this machine wanted while recording (steal \
             time: this virtual machine's host ran other work): the times include waits for \
             the host that the trace cannot show; compare with a run on a quieter host",
            100.0 * self.stolen as f64 / self.wanted as f64
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(user: u64, idle: u64, steal: u64) -> CpuTimes {
        CpuTimes::parse(&format!(
            "cpu  {user} 0 100 {idle} 10 0 5 {steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1\n"
        ))
        .unwrap()
    }

    /// The warning for the interval from `before` to `after`.
    fn warning(before: CpuTimes, after: CpuTimes) -> Option<String> {
        after.since(before)?.steal_warning()
    }

    #[test]
    fn the_cpu_line_gives_what_the_cpus_wanted_and_what_the_host_kept() {
        let t = stat(1_000, 50_000, 40);
        assert_eq!(
            t,
            CpuTimes {
                wanted: 1_000 + 100 + 5 + 40,
                stolen: 40
            }
        );
        // The per-CPU lines are not the machine's; a line without steal is not read.
        assert_eq!(CpuTimes::parse("cpu0 1 2 3 4 5 6 7 8\n"), None);
        assert_eq!(CpuTimes::parse("cpu  1 2 3 4 5 6 7\n"), None);
        assert_eq!(CpuTimes::parse("cpu  1 2 x 4 5 6 7 8\n"), None);
    }

    #[test]
    fn steal_is_said_from_a_twentieth_of_the_wanted_time_and_three_ticks() {
        let before = stat(1_000, 50_000, 40);
        // 100 ticks of work, idle time aside: 16 stolen is 16%.
        let w = warning(before, stat(1_084, 60_000, 56)).expect("16% is said");
        assert!(w.contains("kept 16% of the CPU time"), "{w}");
        // 4 of 100: not said, however idle the machine was.
        assert_eq!(warning(before, stat(1_096, 50_100, 44)), None);
        // 2 ticks of a 10-tick command: a large share of nothing.
        assert_eq!(warning(before, stat(1_008, 50_100, 42)), None);
        // 3 of 20: said.
        assert!(warning(before, stat(1_017, 50_100, 43)).is_some());
        // Counters that went back (another boot's numbers): nothing.
        assert_eq!(stat(900, 50_100, 30).since(before), None);
    }
}
