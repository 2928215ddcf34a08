//! The conditions that save a snapshot of a ring recording by themselves
//! (`--trigger`): [`Trigger`] parses one (`psi-cpu>30%`, `psi-io>20%`,
//! `psi-memory>10%`, `cmd-slower:NAME>2s`) with an error that teaches the
//! syntax, and [`Watch`] looks at them while the recording runs and says
//! when one *becomes* true: each fires once per episode and is armed again
//! once its condition has cleared.
//!
//! - PSI: the `some avg10` of `/proc/pressure/{cpu,io,memory}` (the share
//!   of the last 10 s some task waited for that resource), read every
//!   second (the kernel updates it every 2 s).
//! - `cmd-slower:NAME>D`: a process whose name (`comm`, 15 bytes at most:
//!   a longer NAME is compared by its first 15) has been running longer
//!   than D. It polls `/proc` twice a second rather than reading the exits
//!   of the recording: perf owns its overwritten ring buffers and hands
//!   nothing over until a snapshot, so the recording cannot be read live
//!   without a second recorder; polling needs no privilege, costs one
//!   directory listing per poll plus one `stat` read per new process (a
//!   process is read again only while it is younger than
//!   [`YOUNG`], when it may still `exec` under its final name), and fires
//!   while a slow process still runs (a hung one too) rather than after
//!   it ends. A process that lives less than a poll is never seen, which
//!   is harmless: only those slower than D matter. The episode lasts while
//!   any process named NAME older than D runs. As it fires, what that process's
//!   threads do and wait on then is walked (`slowlab-hang`), said in part and kept
//!   for the snapshot's `.waits.txt` ([`Subject::waits`]).
//!
//! It does not save anything: `session` schedules the snapshot.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// How often PSI is read.
const PSI_POLL: Duration = Duration::from_secs(1);

/// How often `/proc` is listed for `cmd-slower`.
const PROC_POLL: Duration = Duration::from_millis(500);

/// A process is read again on every poll while younger than this (it may
/// still `exec` under another name).
const YOUNG: Duration = Duration::from_secs(3);

/// The longest process name the kernel keeps (`TASK_COMM_LEN` - 1).
const COMM_LEN: usize = 15;

/// The resources PSI reports on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pressure {
    Cpu,
    Io,
    Memory,
}

impl Pressure {
    fn name(self) -> &'static str {
        match self {
            Pressure::Cpu => "cpu",
            Pressure::Io => "io",
            Pressure::Memory => "memory",
        }
    }

    /// Its file, `/proc/pressure/cpu`.
    pub fn file(self) -> String {
        format!("/proc/pressure/{}", self.name())
    }
}

/// One `--trigger` condition.
#[derive(Clone, Debug, PartialEq)]
pub enum Trigger {
    /// `some avg10` of the resource above this percentage.
    Psi { resource: Pressure, above: f64 },
    /// A process named `name` running longer than `longer_than`.
    CmdSlower { name: String, longer_than: Duration },
}

/// What a bad `--trigger` says: the syntax, with examples.
pub const TRIGGER_SYNTAX: &str = "expected psi-cpu>P%, psi-io>P% or psi-memory>P% (the `some avg10` of /proc/pressure above P percent) or cmd-slower:NAME>Ds (a process named NAME running longer than D seconds; also Dms), e.g. --trigger 'psi-cpu>30%' --trigger 'cmd-slower:make>2s'";

impl std::str::FromStr for Trigger {
    type Err = String;

    fn from_str(text: &str) -> Result<Trigger, String> {
        let bad = |why: &str| format!("bad trigger `{text}`: {why}{TRIGGER_SYNTAX}");
        let t = text.trim();
        if let Some(rest) = t.strip_prefix("cmd-slower:") {
            let Some((name, limit)) = rest.rsplit_once('>') else {
                return Err(bad("no `>`; "));
            };
            if name.is_empty() {
                return Err(bad("no process name; "));
            }
            let longer_than = parse_duration(limit.trim())
                .ok_or_else(|| bad("the time is not like 2s, 1.5s or 500ms; "))?;
            return Ok(Trigger::CmdSlower {
                name: name.to_owned(),
                longer_than,
            });
        }
        if let Some(rest) = t.strip_prefix("psi-") {
            let Some((what, value)) = rest.split_once('>') else {
                return Err(bad("no `>`; "));
            };
            let resource = match what.trim() {
                "cpu" => Pressure::Cpu,
                "io" => Pressure::Io,
                "memory" => Pressure::Memory,
                _ => return Err(bad("PSI covers cpu, io and memory; ")),
            };
            let value = value.trim();
            let number = value.strip_suffix('%').unwrap_or(value).trim();
            let above: f64 = number
                .parse()
                .ok()
                .filter(|p: &f64| (0.0..100.0).contains(p))
                .ok_or_else(|| bad("the share is not a percentage from 0 to 100; "))?;
            return Ok(Trigger::Psi { resource, above });
        }
        Err(bad(""))
    }
}

impl std::fmt::Display for Trigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trigger::Psi { resource, above } => write!(f, "psi-{}>{above}%", resource.name()),
            Trigger::CmdSlower { name, longer_than } => {
                write!(f, "cmd-slower:{name}>{}s", longer_than.as_secs_f64())
            }
        }
    }
}

/// `2s`, `1.5s`, `500ms` (a bare number is seconds).
fn parse_duration(text: &str) -> Option<Duration> {
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number.trim().parse().ok()?;
    (value.is_finite() && value >= 0.0 && value * scale < 1e7)
        .then(|| Duration::from_secs_f64(value * scale))
}

/// The `some avg10` percentage of a `/proc/pressure/*` text.
pub fn parse_psi_some_avg10(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("avg10="))?
        .parse()
        .ok()
}

/// Checks that the kernel has what the triggers read (PSI files), with a
/// one-line reason and what to do when not.
pub fn check_available(triggers: &[Trigger]) -> Result<(), String> {
    for t in triggers {
        if let Trigger::Psi { resource, .. } = t {
            let file = resource.file();
            let text = std::fs::read_to_string(&file).map_err(|e| {
                format!("--trigger '{t}' reads {file}, which cannot be read ({e}): this kernel has no pressure stall information; boot it with psi=1 (CONFIG_PSI), or use cmd-slower triggers")
            })?;
            if parse_psi_some_avg10(&text).is_none() {
                return Err(format!("--trigger '{t}': {file} has no `some avg10=` line"));
            }
        }
    }
    Ok(())
}

/// A trigger that became true.
#[derive(Debug, Clone, PartialEq)]
pub struct Fired {
    /// The trigger as given (`psi-cpu>30%`).
    pub trigger: String,
    /// What was seen (`some avg10 = 45.10%`, `make (pid 123) has run 2.1 s`).
    pub seen: String,
    /// The process a `cmd-slower` trigger fired for (a PSI trigger names none).
    pub subject: Option<Subject>,
}

/// The process a snapshot is about: the slow one of a `cmd-slower` trigger, which its
/// critical path should start from rather than from the longest-running process.
#[derive(Debug, Clone, PartialEq)]
pub struct Subject {
    pub pid: u32,
    /// Its command line when the trigger fired (`/proc/PID/cmdline`), else its name.
    pub args: Vec<String>,
    /// What its threads did and waited on when the trigger fired, and who held that
    /// (`slowlab hang --all-threads PID`'s text): the snapshot's `.waits.txt`. A wait
    /// that began before the ring's window, a lock taken long ago, is named there only.
    pub waits: Option<String>,
}

impl Subject {
    /// The process `pid` named `comm`, its command line read now if it is still there.
    fn of(pid: u32, comm: &str) -> Subject {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let args: Vec<String> = cmdline
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        Subject {
            pid,
            args: if args.is_empty() {
                vec![comm.to_owned()]
            } else {
                args
            },
            waits: None,
        }
    }

    /// Walks what its threads do and wait on now (see [`Subject::waits`]); returns each
    /// thread's chain in one sentence. Nothing when it cannot be walked (it has exited).
    fn walk_waits(&mut self) -> Vec<String> {
        // Every thread: one on a CPU, or asleep on a timer, is an answer too.
        let options = slowlab_hang::Options { all_threads: true };
        let Ok(report) = slowlab_hang::walk(Path::new("/"), self.pid as i32, &options) else {
            return Vec::new();
        };
        self.waits = Some(slowlab_hang::render::text(&report));
        report
            .threads
            .iter()
            .map(slowlab_hang::render::sentence)
            .collect()
    }
}

/// The most chains a trigger's firing says on stderr (the rest are in `.waits.txt`).
const CHAINS_SAID: usize = 3;

/// One trigger and whether its episode is going on.
struct Armed {
    trigger: Trigger,
    in_episode: bool,
}

impl Armed {
    /// Takes what the condition's look saw (`None`: it is false), with the process it
    /// saw; returns the firing when an episode starts, with that process's command line
    /// read then (once an episode, not at every look while it lasts).
    fn update(&mut self, seen: Option<(String, Option<u32>)>) -> Option<Fired> {
        match seen {
            Some((seen, pid)) if !self.in_episode => {
                self.in_episode = true;
                let subject = match (&self.trigger, pid) {
                    (Trigger::CmdSlower { name, .. }, Some(pid)) => Some(Subject::of(pid, name)),
                    _ => None,
                };
                Some(Fired {
                    trigger: self.trigger.to_string(),
                    seen,
                    subject,
                })
            }
            Some(_) => None,
            None => {
                self.in_episode = false;
                None
            }
        }
    }
}

/// A process seen in `/proc`.
struct Seen {
    comm: String,
    /// Start, in clock ticks since boot (`/proc/PID/stat` field 22).
    start_ticks: u64,
}

/// The triggers of a recording, looked at by [`Watch::poll`].
pub struct Watch {
    armed: Vec<Armed>,
    last_psi: Option<Instant>,
    last_proc: Option<Instant>,
    /// The processes seen at the last `/proc` listing (only with a
    /// `cmd-slower` trigger).
    processes: HashMap<u32, Seen>,
    ticks_per_second: u64,
}

/// The snapshots the triggers asked for, each due `after` its trigger fired.
pub(crate) struct Scheduled {
    pending: Vec<(Instant, Due)>,
    after: Duration,
}

/// A snapshot a trigger asked for, now due.
pub(crate) struct Due {
    /// Why (`trigger COND`).
    pub why: String,
    /// The process it is about, if the trigger named one.
    pub subject: Option<Subject>,
}

impl Scheduled {
    pub(crate) fn new(after: Duration) -> Scheduled {
        Scheduled {
            pending: Vec::new(),
            after,
        }
    }

    /// Looks at `watch`'s conditions, says on stderr which fired, and returns the
    /// snapshots due by `now`.
    pub(crate) fn due(&mut self, watch: &mut Watch, now: Instant) -> Vec<Due> {
        if !watch.is_empty() {
            for mut fired in watch.poll(now) {
                eprintln!(
                    "slowlab: trigger {} fired: {}; saving a snapshot in {:.1} s",
                    fired.trigger,
                    fired.seen,
                    self.after.as_secs_f64()
                );
                if let Some(chains) = fired.subject.as_mut().map(Subject::walk_waits) {
                    for chain in chains.iter().take(CHAINS_SAID) {
                        eprintln!("slowlab:   now {chain}");
                    }
                    if chains.len() > CHAINS_SAID {
                        let more = chains.len() - CHAINS_SAID;
                        eprintln!("slowlab:   … and {more} more, in the snapshot's .waits.txt");
                    }
                }
                let due = Due {
                    why: format!("trigger {}", fired.trigger),
                    subject: fired.subject,
                };
                self.pending.push((now + self.after, due));
            }
        }
        let (due, later): (Vec<_>, Vec<_>) = self.pending.drain(..).partition(|(at, _)| *at <= now);
        self.pending = later;
        due.into_iter().map(|(_, due)| due).collect()
    }

    /// When [`Scheduled::due`] must be called next: the first snapshot due, or `watch`'s
    /// next look; `None` when neither has anything to do.
    pub(crate) fn next(&self, watch: &Watch) -> Option<Instant> {
        let due = self.pending.iter().map(|(at, _)| *at).min();
        due.into_iter().chain(watch.next_look()).min()
    }
}

/// A recording that stops before its triggers' snapshots are due says so, once for
/// each: they were not saved (the final trace holds the last seconds, with the moment
/// each trigger fired in them when it came within the ring's window).
impl Drop for Scheduled {
    fn drop(&mut self) {
        let now = Instant::now();
        for (at, Due { why, .. }) in self.pending.drain(..) {
            eprintln!(
                "slowlab: the snapshot of {why} was not saved: the recording stopped {:.1} s \
                 before it was due; the final trace holds the last seconds",
                at.saturating_duration_since(now).as_secs_f64()
            );
        }
    }
}

impl Watch {
    pub fn new(triggers: &[Trigger]) -> Watch {
        // SAFETY: sysconf has no preconditions.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        Watch {
            armed: triggers
                .iter()
                .map(|t| Armed {
                    trigger: t.clone(),
                    in_episode: false,
                })
                .collect(),
            last_psi: None,
            last_proc: None,
            processes: HashMap::new(),
            ticks_per_second: if ticks > 0 { ticks as u64 } else { 100 },
        }
    }

    pub fn is_empty(&self) -> bool {
        self.armed.is_empty()
    }

    /// When [`Watch::poll`] has a condition to look at next (`None`: it has none).
    pub fn next_look(&self) -> Option<Instant> {
        let kinds = |psi: bool| {
            self.armed
                .iter()
                .any(|a| matches!(a.trigger, Trigger::Psi { .. }) == psi)
        };
        let next = |last: Option<Instant>, every| last.map_or_else(Instant::now, |t| t + every);
        let psi = kinds(true).then(|| next(self.last_psi, PSI_POLL));
        let proc = kinds(false).then(|| next(self.last_proc, PROC_POLL));
        psi.into_iter().chain(proc).min()
    }

    /// Looks at the conditions due (PSI every second, `/proc` twice a
    /// second) and returns those that became true since the last look.
    pub fn poll(&mut self, now: Instant) -> Vec<Fired> {
        let psi_due = self
            .last_psi
            .is_none_or(|t| now.duration_since(t) >= PSI_POLL);
        let proc_due = self
            .last_proc
            .is_none_or(|t| now.duration_since(t) >= PROC_POLL);
        let has_cmd = self
            .armed
            .iter()
            .any(|a| matches!(a.trigger, Trigger::CmdSlower { .. }));
        if psi_due {
            self.last_psi = Some(now);
        }
        let mut uptime = None;
        if proc_due && has_cmd {
            self.last_proc = Some(now);
            uptime = boot_ticks(self.ticks_per_second);
            if let Some(up) = uptime {
                self.list_processes(Path::new("/proc"), up);
            }
        }
        let mut fired = Vec::new();
        for i in 0..self.armed.len() {
            let seen = match &self.armed[i].trigger {
                Trigger::Psi { resource, above } => {
                    if !psi_due {
                        continue;
                    }
                    let Ok(text) = std::fs::read_to_string(resource.file()) else {
                        continue;
                    };
                    let Some(avg10) = parse_psi_some_avg10(&text) else {
                        continue;
                    };
                    (avg10 > *above).then(|| (format!("some avg10 = {avg10:.2}%"), None))
                }
                Trigger::CmdSlower { name, longer_than } => {
                    let Some(up) = uptime else { continue };
                    self.slower(name, *longer_than, up)
                }
            };
            if let Some(f) = self.armed[i].update(seen) {
                fired.push(f);
            }
        }
        fired
    }

    /// Lists `proc`: new processes (and those younger than [`YOUNG`]) are
    /// read, the gone forgotten.
    fn list_processes(&mut self, proc: &Path, uptime_ticks: u64) {
        let young = YOUNG.as_secs() * self.ticks_per_second;
        let mut alive = HashMap::with_capacity(self.processes.len());
        for pid in crate::companions::pids(proc) {
            match self.processes.remove(&pid) {
                Some(seen) if uptime_ticks.saturating_sub(seen.start_ticks) > young => {
                    alive.insert(pid, seen);
                }
                _ => {
                    let stat = std::fs::read_to_string(proc.join(pid.to_string()).join("stat"));
                    if let Some(seen) = stat.ok().as_deref().and_then(parse_stat) {
                        alive.insert(pid, seen);
                    }
                }
            }
        }
        self.processes = alive;
    }

    /// What a `cmd-slower:NAME>D` trigger sees: the oldest process named `name` when it
    /// has run longer than `longer_than`, said, with its pid.
    fn slower(
        &self,
        name: &str,
        longer_than: Duration,
        uptime_ticks: u64,
    ) -> Option<(String, Option<u32>)> {
        let (pid, age) = self
            .slowest(name, uptime_ticks)
            .filter(|(_, age)| *age > longer_than)?;
        let seen = format!("{name} (pid {pid}) has run {:.1} s", age.as_secs_f64());
        Some((seen, Some(pid)))
    }

    /// The oldest running process named `name`, and how long it has run.
    fn slowest(&self, name: &str, uptime_ticks: u64) -> Option<(u32, Duration)> {
        let name = truncate_comm(name);
        self.processes
            .iter()
            .filter(|(_, s)| s.comm == name)
            .min_by_key(|(_, s)| s.start_ticks)
            .map(|(&pid, s)| {
                let ticks = uptime_ticks.saturating_sub(s.start_ticks);
                (
                    pid,
                    Duration::from_secs_f64(ticks as f64 / self.ticks_per_second as f64),
                )
            })
    }
}

/// `name` as the kernel keeps it: its first 15 bytes.
fn truncate_comm(name: &str) -> &str {
    if name.len() <= COMM_LEN {
        return name;
    }
    let mut end = COMM_LEN;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// Name and start of a `/proc/PID/stat` text.
fn parse_stat(stat: &str) -> Option<Seen> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_owned();
    // Fields after the name start at field 3 (state); starttime is 22.
    let start_ticks = stat
        .get(close + 1..)?
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()?;
    Some(Seen { comm, start_ticks })
}

/// Clock ticks since boot, the clock of `/proc/PID/stat`'s start time.
fn boot_ticks(ticks_per_second: u64) -> Option<u64> {
    // SAFETY: clock_gettime writes the timespec it is given.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } != 0 {
        return None;
    }
    let ns = ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128;
    Some((ns * u128::from(ticks_per_second) / 1_000_000_000) as u64)
}

#[cfg(test)]
mod tests;
