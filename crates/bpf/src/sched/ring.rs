//! Ring mode of the scheduler recorder (`slowlab record --backend bpf --ring SECONDS`):
//! what the drain thread keeps in memory instead of a file, and the snapshots it writes.
//!
//! The recorder's [`SchedWriter`] writes into a [`Sink`]; in ring mode that is a
//! [`Window`], which cuts what it is given into chunks where an EVENTS section ends and
//! keeps the chunks (packed, `ring/packed.rs`) of about the last SECONDS (and at most
//! `max_bytes` of them as they came), with what they need besides: every thread and
//! process mapping still alive or seen within the window, and the frames of the stacks
//! they refer to. A snapshot ([`Window::write`], in `ring/snapshot.rs`) is
//! a whole recording of the window: the header, those threads and mappings, the chunks,
//! their stacks and an END; it begins with the switch that blocked each thread still
//! waiting since before the window (a hung process has no record in a window shorter than
//! its wait), moved to the window's start, after the entry of the wait's syscall (futex,
//! wait4, waitid, flock) if it is in one, so that its wait has its stack, its state and
//! what it waits on. A window that spills ([`RingOptions::spill`]) keeps its
//! chunks, as they came, in a file instead of memory, and the stacks in its chunks (the
//! drain moves them there): one recording cut into runs keeps all of a long run that way,
//! as a file recording does.
//!
//! Bounded however long it runs: chunks older than the window go; threads and processes
//! that exited before it go; a stack nothing in the window refers to goes from the
//! kernel's stack map, then from memory ([`StackBook`], in `ring/stacks.rs`). It does not
//! talk to the kernel.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::time::Duration;

use rustc_hash::FxHashMap as HashMap;
use slowlab_model::host_steal::CpuTimes;

use super::format::{
    Head, RecordKind, SchedRecord, SchedWriter, KIND_SWITCH, KIND_SYS_ENTER, RECORD_LEN,
};

mod ids;
mod packed;
mod snapshot;
mod stacks;
use packed::{Packed, Packer};
pub(crate) use stacks::{MapStack, StackBook};

/// How far the window's start moves between two lettings-go of the threads and processes
/// that exited before it.
const LET_GO_EVERY_NS: u64 = 1_000_000_000;

/// How much of a recording ring mode keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingOptions {
    /// About how long: chunks that ended longer ago than this before the newest record go.
    pub window: Duration,
    /// At most this many bytes of sections (the oldest go first), whatever the window.
    pub max_bytes: u64,
    /// The chunks go, as they came, to a file on the output's file system (unlinked at
    /// once: it goes with the recorder) instead of being packed in memory. The window and
    /// `max_bytes` still bound what a snapshot holds, but the file gives its space back
    /// only at a forget: for one recording cut into runs, with no age limit or bound.
    /// The stacks go with the chunks, as a file recording's go into its file: the drain
    /// moves them out of the kernel's map into the chunks, and the window keeps none in
    /// memory (92 s of a `cargo build` named 1.5 million stacks).
    pub spill: bool,
}

/// What a snapshot holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotInfo {
    pub records: u64,
    /// The first and last record's times (CLOCK_MONOTONIC ns); 0 when empty.
    pub first_ns: u64,
    pub last_ns: u64,
    /// Bytes of the file.
    pub bytes: u64,
    /// Distinct stacks written.
    pub stacks: u64,
    /// The machine's CPU time over the window, and the host's steal of it (its STEAL
    /// section), when the drain read the counters.
    pub cpu_times: Option<CpuTimes>,
}

/// Where the recorder's writer puts its sections: a file, or a ring's window.
pub(crate) enum Sink {
    File(BufWriter<File>),
    Window(Box<Window>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::File(f) => f.write(buf),
            Sink::Window(w) => {
                w.current.extend_from_slice(buf);
                Ok(buf.len())
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::File(f) => f.flush(),
            Sink::Window(_) => Ok(()),
        }
    }
}

/// The fields of the recording's header, for each snapshot's.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Header {
    pub start_mono_ns: u64,
    pub start_real_ns: u64,
    pub nr_cpus: u32,
    pub sample_freq: u32,
    /// The samples are taken on the scheduler's tick (a SAMPLES section says so).
    pub samples_on_tick: bool,
}

impl Header {
    /// A writer of a recording with this header, its SAMPLES section written.
    pub(crate) fn writer<W: Write>(&self, out: W) -> io::Result<SchedWriter<W>> {
        let mut w = SchedWriter::new(
            out,
            self.start_mono_ns,
            self.start_real_ns,
            self.nr_cpus,
            self.sample_freq,
        )?;
        if self.samples_on_tick {
            w.samples_on_tick()?;
        }
        Ok(w)
    }
}

/// Where a chunk's bytes are kept.
enum Stored {
    /// Packed, in memory.
    Memory(Packed),
    /// As they came, at `at` in the spill file.
    Spilled { at: u64, len: usize },
}

impl Stored {
    /// The bytes as they came.
    fn raw_len(&self) -> usize {
        match self {
            Stored::Memory(p) => p.raw_len(),
            Stored::Spilled { len, .. } => *len,
        }
    }
}

/// The file a spilling window keeps its chunks in, one after the other.
pub(crate) struct Spill {
    file: File,
    len: u64,
}

impl Spill {
    pub(crate) fn new(file: File) -> Spill {
        Spill { file, len: 0 }
    }

    fn append(&mut self, bytes: &[u8]) -> io::Result<Stored> {
        let at = self.len;
        self.file.write_all_at(bytes, at)?;
        self.len += bytes.len() as u64;
        Ok(Stored::Spilled {
            at,
            len: bytes.len(),
        })
    }

    /// Lets go of every chunk in it (their space goes back to the file system).
    fn clear(&mut self) -> io::Result<()> {
        self.file.set_len(0)?;
        self.len = 0;
        Ok(())
    }
}

/// Whole sections, from one cut to the next.
struct Chunk {
    bytes: Stored,
    records: u64,
    first_ns: u64,
    last_ns: u64,
    /// The stack ids its records name, each once.
    stacks: Vec<u32>,
}

struct Thread {
    pid: u32,
    comm: String,
    exited_ns: Option<u64>,
}

impl Thread {
    /// Whether it ran at `since` or after: alive, or exited then.
    fn seen_since(&self, since: u64) -> bool {
        self.exited_ns.is_none_or(|ns| ns >= since)
    }
}

/// The state indexes of a switch away from a thread that does not wait (see
/// [`RecordKind::Switch`]): runnable, preempted, and a thread's last switch, as it dies
/// (EXIT_DEAD, EXIT_ZOMBIE: `1 << 4`, `1 << 5`).
const NOT_WAITING: [u8; 4] = [0, 0xff, 5, 6];

/// A thread's entry into a wait's syscall (futex, wait4, waitid, flock: SYS_ENTER), kept
/// until it returns: what a thread blocked in it waits on (the futex's address, the
/// child waited for).
struct Call {
    time_ns: u64,
    cpu: u16,
    /// The syscall, its first argument and the low 32 bits of its second and third.
    which: u8,
    value: u64,
    a: u32,
    b: u32,
}

impl Call {
    /// Its SYS_ENTER record at `time_ns`.
    fn record_at(&self, tid: u32, time_ns: u64) -> [u8; RECORD_LEN] {
        Head {
            time_ns,
            tid,
            a: self.a,
            b: self.b,
            cpu: self.cpu,
            kind: KIND_SYS_ENTER,
            c: self.which,
            tail: self.value,
        }
        .bytes()
    }
}

/// The switch that blocked a thread, kept until it runs again or exits.
struct Wait {
    time_ns: u64,
    cpu: u16,
    /// The switch's state index (see [`RecordKind::Switch`]).
    state: u8,
    kstack: Option<u32>,
    ustack: Option<u32>,
}

impl Wait {
    /// The stacks it names.
    fn stacks(&self) -> Vec<u32> {
        self.kstack.into_iter().chain(self.ustack).collect()
    }

    /// Its SWITCH record at `time_ns`, to the idle task (who ran next then is not known).
    fn record_at(&self, tid: u32, time_ns: u64) -> [u8; RECORD_LEN] {
        Head {
            time_ns,
            tid,
            a: 0,
            b: 0,
            cpu: self.cpu,
            kind: KIND_SWITCH,
            c: self.state,
            tail: Head::stacks(self.kstack, self.ustack),
        }
        .bytes()
    }
}

/// The last seconds of a recording (see the module documentation).
pub(crate) struct Window {
    header: Header,
    options: RingOptions,
    chunks: VecDeque<Chunk>,
    /// The chunks' bytes as they came (what `max_bytes` bounds, and a snapshot writes).
    bytes: u64,
    packer: Packer,
    /// Where the chunks go instead of memory, when the window spills.
    spill: Option<Spill>,
    /// Bytes written since the last cut, and what their records name.
    current: Vec<u8>,
    current_records: u64,
    current_span: Option<(u64, u64)>,
    newest_ns: u64,
    threads: HashMap<u32, Thread>,
    /// Each process's mappings, as its last MAPS section gave them.
    mappings: HashMap<u32, String>,
    /// The processes that exited, and when: their mappings go with them once the window
    /// has moved past (a process's mappings may be reported after its exit).
    exited: HashMap<u32, u64>,
    /// The stacks the records name, with their frames.
    stacks: StackBook,
    /// The window's start when `trim` last let go of threads and processes.
    let_go_at: u64,
    /// The command the recording runs: its pid and arguments.
    command: Option<(u32, Vec<String>)>,
    /// Each blocked thread's blocking switch, by tid, its stacks held named while it is
    /// kept (not in a spilling window, which keeps no stacks).
    waits: HashMap<u32, Wait>,
    /// Each thread's wait syscall in progress, by tid (not in a spilling window either).
    calls: HashMap<u32, Call>,
    /// The machine's CPU time counters as the drain read them, with when (CLOCK_MONOTONIC
    /// ns), oldest first: the first at or before the window's start, for a snapshot's
    /// steal time over its window.
    cpu_times: VecDeque<(u64, CpuTimes)>,
}

impl Window {
    /// A window of `options`, its chunks in `spill` when given (see [`RingOptions::spill`]).
    pub(crate) fn new(header: Header, options: RingOptions, spill: Option<Spill>) -> Window {
        Window {
            header,
            options,
            chunks: VecDeque::new(),
            bytes: 0,
            packer: Packer::new(),
            spill,
            current: Vec::new(),
            current_records: 0,
            current_span: None,
            newest_ns: 0,
            threads: HashMap::default(),
            mappings: HashMap::default(),
            exited: HashMap::default(),
            stacks: StackBook::default(),
            let_go_at: 0,
            command: None,
            waits: HashMap::default(),
            calls: HashMap::default(),
            cpu_times: VecDeque::new(),
        }
    }

    /// The machine's CPU time counters, read at `time_ns`.
    pub(crate) fn note_cpu_times(&mut self, time_ns: u64, times: CpuTimes) {
        self.cpu_times.push_back((time_ns, times));
    }

    /// The command the recording runs, for every snapshot.
    pub(crate) fn note_command(&mut self, pid: u32, args: &[String]) {
        self.command = Some((pid, args.to_vec()));
    }

    /// Forgets what was written so far (the writer's header: each snapshot has its own).
    pub(crate) fn clear_written(&mut self) {
        self.current.clear();
    }

    /// A record given to the writer.
    pub(crate) fn note_record(&mut self, r: &SchedRecord) {
        self.current_records += 1;
        let (first, last) = self.current_span.unwrap_or((r.time_ns, r.time_ns));
        self.current_span = Some((first.min(r.time_ns), last.max(r.time_ns)));
        self.newest_ns = self.newest_ns.max(r.time_ns);
        if self.spill.is_none() {
            self.stacks.name(r.kstack);
            self.stacks.name(r.ustack);
        }
        match r.kind {
            RecordKind::Switch if self.spill.is_none() => self.note_switch(r),
            RecordKind::SysEnter if self.spill.is_none() => {
                let call = Call {
                    time_ns: r.time_ns,
                    cpu: r.cpu,
                    which: r.c,
                    value: r.value,
                    a: r.a,
                    b: r.b,
                };
                self.calls.insert(r.tid, call);
            }
            RecordKind::SysExit => {
                self.calls.remove(&r.tid);
            }
            RecordKind::Exit => {
                self.ran(r.tid);
                self.calls.remove(&r.tid);
                if let Some(t) = self.threads.get_mut(&r.tid) {
                    t.exited_ns = Some(r.time_ns);
                }
                if r.tid == r.a {
                    self.exited.insert(r.a, r.time_ns);
                }
            }
            RecordKind::Exec => {
                if let Some(comm) = r.comm() {
                    self.note_thread(r.a, r.tid, comm);
                }
                self.born_again(r.a);
            }
            // A new process (thread `a` of process `b`, its first).
            RecordKind::Fork if r.a == r.b => self.born_again(r.b),
            _ => {}
        }
    }

    /// A switch: the thread switched out into a wait is kept as waiting, with its stacks;
    /// one that stays runnable or is gone (its last switch, after its EXIT), and the
    /// thread switched in, are not.
    fn note_switch(&mut self, r: &SchedRecord) {
        self.ran(r.a);
        if NOT_WAITING.contains(&r.c) {
            self.ran(r.tid);
            return;
        }
        let wait = Wait {
            time_ns: r.time_ns,
            cpu: r.cpu,
            state: r.c,
            kstack: r.kstack,
            ustack: r.ustack,
        };
        self.stacks.hold(&wait.stacks());
        if let Some(old) = self.waits.insert(r.tid, wait) {
            self.stacks.let_go(&old.stacks());
        }
    }

    /// Thread `tid` runs (or exited): it waits no more.
    fn ran(&mut self, tid: u32) {
        if let Some(old) = self.waits.remove(&tid) {
            self.stacks.let_go(&old.stacks());
        }
    }

    /// A process that runs, with a pid the window may hold as exited (the pid reused):
    /// its mappings are no longer the exited process's to let go of at its exit.
    fn born_again(&mut self, pid: u32) {
        self.exited.remove(&pid);
    }

    /// A thread named in a THREAD section.
    pub(crate) fn note_thread(&mut self, pid: u32, tid: u32, comm: &str) {
        self.threads.insert(
            tid,
            Thread {
                pid,
                comm: comm.to_string(),
                exited_ns: None,
            },
        );
    }

    /// A process's mappings, as a MAPS section gives them (a late report of an exited
    /// process's mappings keeps its exit, so they still go with it).
    pub(crate) fn note_mappings(&mut self, pid: u32, text: &str) {
        self.mappings.insert(pid, text.to_string());
    }

    /// Ends a chunk with what was written since the last cut (call it when no record is
    /// gathered outside a section), and lets the oldest go. Fails only when the spill file
    /// cannot take the chunk (a full disk).
    pub(crate) fn cut(&mut self) -> io::Result<()> {
        if self.current.is_empty() {
            return Ok(());
        }
        let bytes = match &mut self.spill {
            Some(spill) => spill.append(&self.current)?,
            None => Stored::Memory(self.packer.pack(&self.current)),
        };
        let (first_ns, last_ns) = self.current_span.take().unwrap_or((0, 0));
        let stacks = self.stacks.cut();
        let chunk = Chunk {
            bytes,
            records: std::mem::take(&mut self.current_records),
            first_ns,
            last_ns,
            stacks,
        };
        self.current.clear();
        self.bytes += chunk.bytes.raw_len() as u64;
        self.chunks.push_back(chunk);
        self.trim();
        Ok(())
    }

    /// Lets go of every record so far (the writer's events flushed first): the next
    /// snapshot holds only what comes after, with the threads and mappings alive then. One
    /// recording is so cut into runs (`lab --trace`: a trace for each run of a scenario).
    pub(crate) fn forget(&mut self) -> io::Result<()> {
        self.cut()?;
        while let Some(gone) = self.chunks.pop_front() {
            self.stacks.let_go(&gone.stacks);
        }
        for (_, wait) in std::mem::take(&mut self.waits) {
            self.stacks.let_go(&wait.stacks());
        }
        self.calls.clear();
        self.bytes = 0;
        match &mut self.spill {
            Some(spill) => spill.clear(),
            None => Ok(()),
        }
    }

    /// Lets the chunks go that ended before the window, or beyond the bytes allowed (the
    /// newest stays), and the threads and mappings that exited before the oldest kept.
    fn trim(&mut self) {
        let window_ns = self.options.window.as_nanos() as u64;
        while self.chunks.len() > 1 {
            let front = &self.chunks[0];
            let old = front.last_ns > 0 && front.last_ns + window_ns < self.newest_ns;
            if !old && self.bytes <= self.options.max_bytes {
                break;
            }
            self.bytes -= front.bytes.raw_len() as u64;
            if let Some(gone) = self.chunks.pop_front() {
                self.stacks.let_go(&gone.stacks);
            }
        }
        // The counters read before the window's start, but the last of them, go.
        let since = self.oldest_ns();
        while self.cpu_times.get(1).is_some_and(|(ns, _)| *ns <= since) {
            self.cpu_times.pop_front();
        }
        // Letting go walks every thread and exited process: done once the window's start
        // has moved by LET_GO_EVERY_NS, not at each cut (~80 a second under process churn,
        // a twentieth of the drain's time); a snapshot leaves out what is not let go yet.
        if since < self.let_go_at.saturating_add(LET_GO_EVERY_NS) {
            return;
        }
        self.let_go_at = since;
        self.threads.retain(|_, t| t.seen_since(since));
        let mappings = &mut self.mappings;
        self.exited.retain(|pid, ns| {
            let gone = *ns < since;
            if gone {
                mappings.remove(pid);
            }
            !gone
        });
    }

    /// The newest record's time.
    pub(crate) fn newest_ns(&self) -> u64 {
        self.newest_ns
    }

    /// The time the window starts at: its oldest record's.
    fn oldest_ns(&self) -> u64 {
        self.chunks
            .front()
            .map(|c| c.first_ns)
            .or(self.current_span.map(|s| s.0))
            .unwrap_or(self.newest_ns)
    }

    /// Bytes of sections kept.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes + self.current.len() as u64
    }

    /// Bytes of the chunks held in memory (packed).
    #[cfg(test)]
    fn bytes_in_memory(&self) -> u64 {
        let in_memory = |c: &Chunk| match &c.bytes {
            Stored::Memory(p) => p.kept_len() as u64,
            Stored::Spilled { .. } => 0,
        };
        self.chunks.iter().map(in_memory).sum()
    }

    /// Bytes of the spill file (0 without one).
    #[cfg(test)]
    fn bytes_spilled(&self) -> u64 {
        self.spill.as_ref().map_or(0, |s| s.len)
    }

    /// The window's stacks, for the eviction passes and the stacks that come through the
    /// ring.
    pub(crate) fn stacks(&mut self) -> &mut StackBook {
        &mut self.stacks
    }

    /// Whether it keeps its chunks in a spill file; its stacks are then written into its
    /// chunks, and it keeps none ([`RingOptions::spill`]).
    pub(crate) fn spills(&self) -> bool {
        self.spill.is_some()
    }
}

#[cfg(test)]
mod tests;
