//! `slowlab record`'s arguments. Definitions and help only: the binary
//! runs them (a trigger's condition is parsed into `slowlab_record`'s type
//! here, so that a bad one is refused with the others).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

/// Which recorder writes the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// `perf record`: every event slowlab uses, in perf.data.
    Perf,
    /// The eBPF scheduler recorder: CPU samples, switches and wake-ups with stacks,
    /// lifetimes, the syscalls slowlab reads with their paths, page faults and disk
    /// requests, in one file, at a fraction of perf's cost (`slowlab record --ring` keeps
    /// the last seconds in memory and writes them on a snapshot).
    Bpf,
    /// bpf where it can run here (root or CAP_BPF and CAP_PERFMON, kernel BTF; not with
    /// `record --call-graph dwarf`), else perf, saying why.
    Auto,
}

/// `--bpf-stacks`: which stacks the eBPF recorder takes (to measure what they cost).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BpfStacksArg {
    /// No stacks.
    None,
    /// Kernel stacks only.
    Kernel,
    /// Kernel and user stacks on blocking switches, wake-ups by a task and samples.
    Blocking,
    /// Kernel and user stacks on every event.
    All,
}

/// `--samples-on`: what the eBPF recorder's CPU samples are taken on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SamplesOnArg {
    /// A timer of their own at --freq on every CPU, idle or not, as perf samples: an
    /// interrupt each time, which costs more than the sample on a VM.
    Timer,
    /// The scheduler's tick, which a busy CPU takes anyway (CONFIG_HZ times a second,
    /// usually 250; an idle CPU stops it, so idle time is not sampled): no interrupts
    /// of their own.
    Tick,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum CallGraphArg {
    /// Frame pointers: cheap, needs code built with frame pointers.
    Fp,
    /// Copies of the user stack: works without frame pointers, large files.
    Dwarf,
}

/// Record a system-wide trace (with eBPF where it can run, else perf).
///
/// Records every CPU: sampled call stacks (kernel and user), context
/// switches and wake-ups with their stacks, process fork/exec/exit, page
/// faults, disk requests, the syscalls slowlab's detectors use (openat,
/// the stat family, mmap/munmap, unlink, unshare, clone) with their paths,
/// and those that name what a thread waits on (futex, wait4, waitid,
/// flock). With a command,
/// records until it exits and returns its exit code; without, until Ctrl-C,
/// SIGTERM or SIGHUP (also in the background: `slowlab record & … kill -INT
/// $!`), then exits with 128 + the signal once the trace is written. A
/// second signal stops at once, without the trace.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  slowlab record -- make -j2            record while make runs, into slowlab.data
  slowlab record -o idle.data           record until Ctrl-C (or kill -INT/-TERM)
  slowlab record --freq 4000 -- ./app   sample 4,000 times a second per CPU
  slowlab record --backend bpf --samples-on tick -- ./app
                                        sample on the scheduler's tick: no
                                        interrupts of the recorder's own (the
                                        default without a command)
  slowlab record --ring 30              keep only the last ~30 s (buffers sized
                                        from the event rate measured first;
                                        with eBPF, samples on the tick);
                                        `kill -USR2 <slowlab pid>` saves a
                                        snapshot slowlab.data.<time>, Ctrl-C
                                        stops and saves slowlab.data
  slowlab record --save                 from another shell: ask the running
                                        ring recorder for a snapshot, wait for
                                        it, print its path (-o picks one of
                                        several recorders)
  slowlab record --ring 60 --trigger 'psi-cpu>30%' --trigger 'cmd-slower:make>2s'
                                        save a snapshot by itself, --after
                                        seconds after a condition becomes true
                                        (once until it clears)
Then:
  slowlab analyze slowlab.data

The trace is written as slowlab.data.partial and renamed once finished. The
eBPF recorder (--backend bpf, the default where it can run) needs root, or
CAP_BPF and CAP_PERFMON, and a kernel with BTF; perf's needs root or
kernel.perf_event_paranoid = -1, and perf (Debian: linux-perf).")]
pub struct RecordArgs {
    /// Where to write the trace [default: slowlab.data]: perf.data with --backend
    /// perf, slowlab's eBPF format (SLSCHED) otherwise, both read by `analyze`;
    /// with --save, which recorder to ask (needed only when several run).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Samples per second per CPU, on a timer of their own [default: 1000]; with
    /// --backend bpf, giving it takes the samples on that timer, not on the tick.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub freq: Option<u32>,
    /// What the CPU samples are taken on, with --backend bpf [default: tick when
    /// recording the machine (--ring, or no command) without --freq, which is what
    /// lets the recorder run all day (bench/record/README.md); timer when recording
    /// a command, whose seconds need the samples]. A tick's sample stands for 1/HZ
    /// of CPU time, as a timer's for 1/--freq.
    #[arg(long, value_enum, value_name = "CLOCK")]
    pub samples_on: Option<SamplesOnArg>,
    /// Ring-buffer mode: keep only about the last SECONDS seconds (the
    /// paths and cgroup notes beside the trace too); `slowlab record
    /// --save` from another shell, or SIGUSR2, saves a snapshot.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u32).range(1..=86_400))]
    pub ring: Option<u32>,
    /// Ring mode: save a snapshot when COND becomes true, once until it
    /// clears (repeatable): psi-cpu>P%, psi-io>P%, psi-memory>P% (PSI
    /// `some avg10`), cmd-slower:NAME>Ds (a process named NAME running
    /// longer than D seconds; its snapshot's line says how to ask for that
    /// process's critical path, and its `.waits.txt` what the process's
    /// threads waited on, and on whom, as the trigger fired).
    #[arg(long, value_name = "COND", requires = "ring", value_parser = parse_trigger)]
    pub trigger: Vec<slowlab_record::Trigger>,
    /// Ring mode: seconds between a trigger and its snapshot, so that it
    /// holds the time after the moment too [default: a third of --ring,
    /// at most 5].
    #[arg(long, value_name = "SECONDS", requires = "trigger", value_parser = parse_seconds)]
    pub after: Option<Duration>,
    /// Ring mode: how many snapshots to keep beside the output (the oldest
    /// are removed, with their side files).
    #[arg(long, value_name = "N", requires = "ring", default_value_t = slowlab_record::DEFAULT_KEEP_SNAPSHOTS as u32, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub keep_snapshots: u32,
    /// Ask the ring recorder running (from another shell) for a snapshot,
    /// wait until it is written and print its path.
    #[arg(long, conflicts_with_all = ["ring", "command", "trigger", "freq", "samples_on", "backend"])]
    pub save: bool,
    /// How user-space stacks are collected (dwarf only with perf: it makes
    /// --backend auto choose perf).
    #[arg(long, value_enum, default_value = "fp")]
    pub call_graph: CallGraphArg,
    /// Do not capture the path strings of syscalls (with perf, the eBPF
    /// probe that writes OUTPUT.paths, which needs root and a kernel with BTF;
    /// with `--backend bpf`, the paths recorded in the trace).
    #[arg(long)]
    pub no_paths: bool,
    /// Which recorder writes the trace.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
    /// `--backend bpf`: bytes of the kernel ring buffer (a power of two).
    #[arg(long, value_name = "BYTES", hide = true)]
    pub bpf_ring_bytes: Option<u32>,
    /// `--backend bpf`: which stacks are taken (blocking: what the critical path reads).
    #[arg(
        long,
        value_enum,
        value_name = "WHICH",
        hide = true,
        default_value = "blocking"
    )]
    pub bpf_stacks: BpfStacksArg,
    /// `--backend bpf`: entries of the kernel's stack map.
    #[arg(long, value_name = "N", hide = true, value_parser = clap::value_parser!(u32).range(1..))]
    pub bpf_stack_entries: Option<u32>,
    /// `--backend bpf`: walk every stack, never reusing a thread's stacks from its last
    /// event at the same site (to measure what the reuse saves).
    #[arg(long, hide = true)]
    pub bpf_no_reuse: bool,
    /// The command to run while recording. It reads slowlab's standard input when that
    /// is a pipe or a file (`-- ./app < input`); from a terminal, none.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Timer samples a second per CPU when `--freq` does not say.
pub const DEFAULT_FREQ: u32 = 1000;

impl RecordArgs {
    /// Timer samples a second per CPU: `--freq`, or [`DEFAULT_FREQ`].
    pub fn sample_freq(&self) -> u32 {
        self.freq.unwrap_or(DEFAULT_FREQ)
    }

    /// Whether the eBPF recorder takes its samples on the scheduler's tick: as
    /// `--samples-on` says, else when it records the machine for as long as it is
    /// left running (`--ring`, or no command), unless `--freq` asks for a rate. A
    /// command's recording keeps the timer: it is over in seconds, and a short
    /// command needs the four times as many samples more than the few points.
    pub fn samples_on_tick(&self) -> bool {
        match self.samples_on {
            Some(clock) => clock == SamplesOnArg::Tick,
            None => (self.ring.is_some() || self.command.is_empty()) && self.freq.is_none(),
        }
    }

    /// Why the options cannot be honoured by the recorder chosen (`bpf`: whether it is
    /// the eBPF one), if they cannot: `--call-graph dwarf` with the eBPF recorder (it
    /// walks frame pointers only); `--samples-on tick` with `--freq` (the tick has the
    /// kernel's rate) or with perf (which samples on a timer of its own).
    pub fn backend_refusal(&self, bpf: bool) -> Option<&'static str> {
        if bpf && matches!(self.call_graph, CallGraphArg::Dwarf) {
            Some(
                "--call-graph dwarf needs perf: use --backend perf (or auto, which then \
                 chooses perf); the eBPF recorder walks frame pointers only",
            )
        } else if self.samples_on != Some(SamplesOnArg::Tick) {
            None
        } else if self.freq.is_some() {
            Some(
                "--samples-on tick samples at the kernel's tick rate (CONFIG_HZ): drop --freq, \
                 or use --samples-on timer for --freq's rate",
            )
        } else if !bpf {
            Some(
                "--samples-on tick needs the eBPF recorder (--backend bpf); perf samples on a \
                 timer of its own",
            )
        } else {
            None
        }
    }
}

pub fn parse_trigger(text: &str) -> Result<slowlab_record::Trigger, String> {
    text.parse()
}

pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    text.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && (0.0..=86_400.0).contains(s))
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            format!("`{text}` is not a number of seconds from 0 to 86400 (e.g. 3 or 0.5)")
        })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        record: RecordArgs,
    }

    fn args(argv: &[&str]) -> RecordArgs {
        Cli::try_parse_from([&["record"], argv].concat())
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"))
            .record
    }

    #[test]
    fn the_machine_is_sampled_on_the_tick_and_a_command_on_the_timer_unless_asked() {
        assert!(args(&["--ring", "60"]).samples_on_tick());
        assert!(!args(&["--ring", "60", "--freq", "500"]).samples_on_tick());
        assert!(!args(&["--ring", "60", "--samples-on", "timer"]).samples_on_tick());
        assert!(args(&[]).samples_on_tick());
        assert!(!args(&["--freq", "1000"]).samples_on_tick());
        assert!(!args(&["--", "make"]).samples_on_tick());
        assert!(args(&["--ring", "60", "--", "make"]).samples_on_tick());
        assert!(args(&["--samples-on", "tick", "--", "make"]).samples_on_tick());
        assert_eq!(args(&[]).sample_freq(), DEFAULT_FREQ);
        assert_eq!(args(&["--freq", "500"]).sample_freq(), 500);
    }

    #[test]
    fn the_tick_and_dwarf_stacks_are_refused_where_the_recorder_cannot_take_them() {
        let tick_at = |freq: &[&str], bpf| {
            args(&[&["--samples-on", "tick"], freq].concat()).backend_refusal(bpf)
        };
        assert!(tick_at(&["--freq", "500"], true).is_some_and(|w| w.contains("drop --freq")));
        assert!(tick_at(&[], false).is_some_and(|w| w.contains("--backend bpf")));
        assert_eq!(tick_at(&[], true), None);
        // Asked for by default, not by the user: nothing to refuse.
        assert_eq!(args(&[]).backend_refusal(false), None);
        assert_eq!(
            args(&["--samples-on", "timer", "--freq", "500"]).backend_refusal(false),
            None
        );
        // Dwarf stacks are perf's.
        let dwarf = args(&["--call-graph", "dwarf"]);
        assert!(dwarf
            .backend_refusal(true)
            .is_some_and(|w| w.contains("--backend perf")));
        assert_eq!(dwarf.backend_refusal(false), None);
    }
}
