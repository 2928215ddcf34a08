//! Ring mode of the scheduler recorder (`slowlab record --backend bpf --ring SECONDS`):
//! what the drain thread keeps in memory instead of a file, and the snapshots it writes.
//!
//! The recorder's [`SchedWriter`] writes into a [`Sink`]; in ring mode that is a
//! [`Window`], which cuts what it is given into chunks where an EVENTS section ends and
//! keeps the chunks of about the last SECONDS (and at most `max_bytes` of them), with what
//! they need besides: every thread and process mapping still alive or seen within the
//! window, and the frames of the stacks they refer to. A snapshot ([`Window::write`]) is
//! a whole recording of the window: the header, those threads and mappings, the chunks,
//! their stacks and an END.
//!
//! Bounded however long it runs: chunks older than the window go; threads and processes
//! that exited before it go; a stack nothing in the window refers to is removed from the
//! kernel's stack map (the recorder deletes the keys [`Window::stacks_to_evict`] gives)
//! and, a pass later, from memory (a record already in the ring buffer may still name
//! it); one the map could not take, which came through the ring
//! ([`Window::note_stack`]), from memory only. It does not talk to the kernel.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use slowlab_model::bundle::partial_file;

use super::format::{RecordKind, SchedEnd, SchedRecord, SchedWriter};

/// How much of a recording ring mode keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingOptions {
    /// About how long: chunks that ended longer ago than this before the newest record go.
    pub window: Duration,
    /// At most this many bytes of sections (the oldest go first), whatever the window.
    pub max_bytes: u64,
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

/// Whole sections, from one cut to the next.
struct Chunk {
    bytes: Vec<u8>,
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

/// One stack's frames, and its key in the kernel's map while it is there.
struct Stack {
    kernel: bool,
    addrs: Vec<u64>,
    key: Option<u64>,
}

/// A stack as read from the kernel's map: its key, id, whether it is a kernel stack, and
/// its addresses.
pub(crate) type MapStack = (u64, u32, bool, Vec<u64>);

/// The last seconds of a recording (see the module documentation).
pub(crate) struct Window {
    header: Header,
    options: RingOptions,
    chunks: VecDeque<Chunk>,
    bytes: u64,
    /// Bytes written since the last cut, and what their records name.
    current: Vec<u8>,
    current_records: u64,
    current_span: Option<(u64, u64)>,
    current_stacks: HashSet<u32>,
    newest_ns: u64,
    threads: HashMap<u32, Thread>,
    /// Each process's mappings, as its last MAPS section gave them.
    mappings: HashMap<u32, String>,
    /// The processes that exited, and when: their mappings go with them once the window
    /// has moved past (a process's mappings may be reported after its exit).
    exited: HashMap<u32, u64>,
    stacks: HashMap<u32, Stack>,
    /// How many chunks name each stack they name (those of the current one are in
    /// `current_stacks`): an eviction pass looks only at the stacks whose count fell to
    /// none, not at every stack of a window that may hold a million.
    chunks_naming: HashMap<u32, u32>,
    /// Stacks that may be named by nothing now, for the next pass: learned since the
    /// last, or let go of by the chunks that named them.
    maybe_unnamed: Vec<u32>,
    /// Stacks the last pass found unnamed (and evicted from the kernel's map): kept in
    /// memory a pass longer, since a record already in the ring buffer may name them.
    spared: Vec<u32>,
    /// The keys of the stacks learned from the kernel's map and still there: only this
    /// window deletes from the map, and the kernel adds a stack under a new id, so a key
    /// here still names the stack learned under it.
    keys_in_map: HashSet<u64>,
    /// The command the recording runs: its pid and arguments.
    command: Option<(u32, Vec<String>)>,
}

impl Window {
    pub(crate) fn new(header: Header, options: RingOptions) -> Window {
        Window {
            header,
            options,
            chunks: VecDeque::new(),
            bytes: 0,
            current: Vec::new(),
            current_records: 0,
            current_span: None,
            current_stacks: HashSet::default(),
            newest_ns: 0,
            threads: HashMap::default(),
            mappings: HashMap::default(),
            exited: HashMap::default(),
            stacks: HashMap::default(),
            chunks_naming: HashMap::default(),
            maybe_unnamed: Vec::new(),
            spared: Vec::new(),
            keys_in_map: HashSet::default(),
            command: None,
        }
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
        self.current_stacks.extend(r.kstack);
        self.current_stacks.extend(r.ustack);
        match r.kind {
            RecordKind::Exit => {
                if let Some(t) = self.threads.get_mut(&r.tid) {
                    t.exited_ns = Some(r.time_ns);
                }
                if r.tid == r.a {
                    self.exited.insert(r.a, r.time_ns);
                }
            }
            RecordKind::Exec => {
                if let Some(comm) = &r.comm {
                    self.note_thread(r.a, r.tid, comm);
                }
                self.born_again(r.a);
            }
            // A new process (thread `a` of process `b`, its first).
            RecordKind::Fork if r.a == r.b => self.born_again(r.b),
            _ => {}
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
    /// gathered outside a section), and lets the oldest go.
    pub(crate) fn cut(&mut self) {
        if self.current.is_empty() {
            return;
        }
        let (first_ns, last_ns) = self.current_span.take().unwrap_or((0, 0));
        let mut stacks: Vec<u32> = self.current_stacks.drain().collect();
        stacks.sort_unstable();
        for &id in &stacks {
            *self.chunks_naming.entry(id).or_default() += 1;
        }
        let chunk = Chunk {
            bytes: std::mem::take(&mut self.current),
            records: std::mem::take(&mut self.current_records),
            first_ns,
            last_ns,
            stacks,
        };
        self.bytes += chunk.bytes.len() as u64;
        self.chunks.push_back(chunk);
        self.trim();
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
            self.bytes -= front.bytes.len() as u64;
            if let Some(gone) = self.chunks.pop_front() {
                self.let_go(&gone.stacks);
            }
        }
        let since = self.oldest_ns();
        self.threads
            .retain(|_, t| t.exited_ns.is_none_or(|ns| ns >= since));
        let mappings = &mut self.mappings;
        self.exited.retain(|pid, ns| {
            let gone = *ns < since;
            if gone {
                mappings.remove(pid);
            }
            !gone
        });
    }

    /// The stacks a chunk let go of named once less; those named no more may go.
    fn let_go(&mut self, stacks: &[u32]) {
        for id in stacks {
            if let Some(n) = self.chunks_naming.get_mut(id) {
                *n -= 1;
                if *n == 0 {
                    self.chunks_naming.remove(id);
                    self.maybe_unnamed.push(*id);
                }
            }
        }
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

    /// Whether a record of the window names stack `id`.
    fn is_named(&self, id: u32) -> bool {
        self.chunks_naming.contains_key(&id) || self.current_stacks.contains(&id)
    }

    /// The stack ids the window's records name, in order.
    fn named_stacks(&self) -> Vec<u32> {
        let mut named: Vec<u32> = self.chunks_naming.keys().copied().collect();
        named.extend(
            self.current_stacks
                .iter()
                .filter(|id| !self.chunks_naming.contains_key(id)),
        );
        named.sort_unstable();
        named
    }

    /// Whether the window learned the stack under `key` in the kernel's map (see
    /// `keys_in_map`): an eviction pass need not read it again.
    pub(crate) fn knows_key(&self, key: u64) -> bool {
        self.keys_in_map.contains(&key)
    }

    /// Stacks read from the kernel's map: their frames, and their keys to delete them by.
    fn learn(&mut self, in_map: Vec<MapStack>) {
        for (key, id, kernel, addrs) in in_map {
            let stack = self.stacks.entry(id).or_insert_with(|| {
                self.maybe_unnamed.push(id);
                Stack {
                    kernel,
                    addrs,
                    key: None,
                }
            });
            if stack.key.is_none() {
                stack.key = Some(key);
                self.keys_in_map.insert(key);
            }
        }
    }

    /// One eviction pass over the stacks added to the kernel's map since the last
    /// (`in_map`: those whose keys the window does not know, [`Window::knows_key`]; all
    /// of them will do): learns their frames, and returns the keys of the stacks nothing
    /// in the window names, for the recorder to delete from the map (the kernel's
    /// generation bumped first). Frames that left the map a pass ago and are still not
    /// named are forgotten.
    pub(crate) fn stacks_to_evict(&mut self, in_map: Vec<MapStack>) -> Vec<u64> {
        self.learn(in_map);
        for id in std::mem::take(&mut self.spared) {
            if !self.is_named(id) {
                self.stacks.remove(&id);
            }
        }
        // Out of the map now, out of memory at the next pass.
        let mut evict = Vec::new();
        for id in std::mem::take(&mut self.maybe_unnamed) {
            if self.is_named(id) {
                continue;
            }
            let Some(stack) = self.stacks.get_mut(&id) else {
                continue;
            };
            if let Some(key) = stack.key.take() {
                self.keys_in_map.remove(&key);
                evict.push(key);
            }
            self.spared.push(id);
        }
        evict
    }

    /// A stack the kernel's map could not take, sent in the ring (it has no key there):
    /// kept while the window names it, and a pass longer, as the map's.
    pub(crate) fn note_stack(&mut self, id: u32, kernel: bool, addrs: Vec<u64>) {
        self.stacks.entry(id).or_insert_with(|| {
            self.maybe_unnamed.push(id);
            Stack {
                kernel,
                addrs,
                key: None,
            }
        });
    }

    /// Stacks that may be named by nothing now (learned, or let go of by the chunks that
    /// named them, since the last eviction pass): what the next pass may forget.
    pub(crate) fn stacks_maybe_unnamed(&self) -> usize {
        self.maybe_unnamed.len()
    }

    /// Stacks known (in memory).
    #[cfg(test)]
    pub(crate) fn stacks_known(&self) -> usize {
        self.stacks.len()
    }

    /// Writes the window as a recording into `path` (through `PATH.partial`, renamed once
    /// whole; removed on failure), with `end`'s counts of losses and its stop time; the
    /// caller has cut first. `in_map`: the kernel's stacks now, learned first.
    pub(crate) fn write(
        &mut self,
        path: &Path,
        in_map: Vec<MapStack>,
        end: SchedEnd,
    ) -> io::Result<SnapshotInfo> {
        self.learn(in_map);
        let partial = partial_file(path);
        let result = self.write_to(&partial, end).and_then(|info| {
            std::fs::rename(&partial, path)?;
            Ok(info)
        });
        if result.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        result
    }

    fn write_to(&self, file: &Path, end: SchedEnd) -> io::Result<SnapshotInfo> {
        let out = BufWriter::with_capacity(1 << 20, File::create(file)?);
        let mut w = self.header.writer(out)?;
        if let Some((pid, args)) = &self.command {
            w.command(*pid, args)?;
        }
        let mut threads: Vec<_> = self.threads.iter().collect();
        threads.sort_by_key(|(tid, _)| **tid);
        for (tid, t) in threads {
            w.thread(t.pid, *tid, &t.comm)?;
        }
        let mut mappings: Vec<_> = self.mappings.iter().collect();
        mappings.sort_by_key(|(pid, _)| **pid);
        for (pid, text) in mappings {
            w.maps(*pid, text)?;
        }
        let mut info = SnapshotInfo::default();
        for c in &self.chunks {
            w.sections(&c.bytes, c.records)?;
            if info.first_ns == 0 {
                info.first_ns = c.first_ns;
            }
            info.last_ns = info.last_ns.max(c.last_ns);
        }
        for id in self.named_stacks() {
            if let Some(s) = self.stacks.get(&id) {
                w.stack(id, s.kernel, &s.addrs)?;
                info.stacks += 1;
            }
        }
        info.records = w.records();
        let end = SchedEnd {
            records: info.records,
            ..end
        };
        let mut out = w.finish(end)?;
        out.flush()?;
        let f = out.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        info.bytes = f.metadata()?.len();
        Ok(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::format::parse_sched;

    fn rec(kind: RecordKind, time_ns: u64, tid: u32, a: u32, kstack: Option<u32>) -> SchedRecord {
        SchedRecord {
            time_ns,
            tid,
            a,
            b: 0,
            cpu: 0,
            kind,
            c: 0,
            kstack,
            ustack: None,
            comm: None,
            value: 0,
            ip: 0,
            args: [0; 6],
            path: None,
        }
    }

    /// The raw bytes of a record as the program writes it.
    fn raw(r: &SchedRecord) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&r.time_ns.to_le_bytes());
        b.extend_from_slice(&r.tid.to_le_bytes());
        b.extend_from_slice(&r.a.to_le_bytes());
        b.extend_from_slice(&r.b.to_le_bytes());
        b.extend_from_slice(&r.cpu.to_le_bytes());
        b.push(1); // SWITCH
        b.push(0);
        b.extend_from_slice(&r.kstack.map_or(-1, |s| s as i32).to_le_bytes());
        b.extend_from_slice(&(-1i32).to_le_bytes());
        b
    }

    /// A writer into a window of `window_ms` (and `max_bytes`) given `seconds` of
    /// switches, ten a second, each second's in a section of its own naming stack `second`.
    fn a_window(window_ms: u64, max_bytes: u64, seconds: u64) -> SchedWriter<Sink> {
        let header = Header {
            start_mono_ns: 1,
            start_real_ns: 2,
            nr_cpus: 2,
            sample_freq: 99,
            samples_on_tick: false,
        };
        let options = RingOptions {
            window: Duration::from_millis(window_ms),
            max_bytes,
        };
        let sink = Sink::Window(Box::new(Window::new(header, options)));
        let mut w = SchedWriter::new(sink, 1, 2, 2, 99).unwrap();
        let Sink::Window(win) = w.out_mut() else {
            unreachable!()
        };
        win.clear_written();
        win.note_thread(10, 10, "old");
        win.note_thread(20, 20, "young");
        win.note_mappings(10, "r-xp /bin/old\n");
        for second in 0..seconds {
            add_second(&mut w, second, second as u32);
        }
        w
    }

    /// Second `second` of the writer's switches, ten of them naming `stack`, in a chunk of
    /// its own (with, in seconds 0 and 1, the processes `a_window` tells of).
    fn add_second(w: &mut SchedWriter<Sink>, second: u64, stack: u32) {
        for i in 0..10 {
            let t = second * 1_000_000_000 + i * 100_000_000 + 1;
            let r = rec(RecordKind::Switch, t, 20, 0, Some(stack));
            w.record(&raw(&r)).unwrap();
            window(w).note_record(&r);
        }
        let win = window(w);
        if second == 0 {
            win.note_record(&rec(RecordKind::Exit, 500_000_000, 10, 10, None));
            // Processes whose mappings are reported after their exit (the kernel's
            // reports come in a ring of their own): one mapped before, one not.
            win.note_mappings(10, "r-xp /bin/old /lib/late.so\n");
            win.note_record(&rec(RecordKind::Exit, 600_000_000, 30, 30, None));
            win.note_mappings(30, "r-xp /bin/gone\n");
            // A process whose pid is used again, below.
            win.note_mappings(40, "r-xp /bin/first\n");
            win.note_record(&rec(RecordKind::Exit, 700_000_000, 40, 40, None));
        }
        if second == 1 {
            // Within the window of the first one's exit.
            let mut fork = rec(RecordKind::Fork, 1_000_000_000, 20, 40, None);
            fork.b = 40;
            win.note_record(&fork);
            win.note_mappings(40, "r-xp /bin/second\n");
        }
        w.flush_events().unwrap();
        window(w).cut();
    }

    fn window(w: &mut SchedWriter<Sink>) -> &mut Window {
        match w.out_mut() {
            Sink::Window(win) => win,
            Sink::File(_) => unreachable!(),
        }
    }

    fn stack(id: u32) -> MapStack {
        (u64::from(id) << 8, id, false, vec![0x1000 + u64::from(id)])
    }

    #[test]
    fn a_snapshot_holds_the_last_seconds_with_their_threads_and_stacks() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = a_window(2_500, 1 << 30, 10);
        let file = dir.path().join("snap");
        let in_map = (0..10).map(stack).collect();
        let info = window(&mut w)
            .write(&file, in_map, SchedEnd::default())
            .unwrap();
        assert!(!dir.path().join("snap.partial").exists());
        let log = parse_sched(&std::fs::read(&file).unwrap()).unwrap();
        assert!(log.warnings.is_empty(), "{:?}", log.warnings);
        // The chunks that ended within 2.5 s of the newest record: seconds 7, 8 and 9.
        assert_eq!(info.records, 30);
        assert_eq!(log.records.len(), 30);
        assert_eq!(log.records[0].time_ns, 7_000_000_001);
        assert_eq!(log.end.unwrap().records, 30);
        let ids: Vec<u32> = log.stacks.iter().map(|s| s.id).collect();
        assert_eq!(ids, [7, 8, 9], "only the stacks the window names");
        assert_eq!(log.stacks[0].addrs, [0x1007]);
        // The thread that exited in second 0 is gone, with its mappings (those reported
        // after its exit too); the live one stays, as does the process that took pid 40.
        let tids: Vec<u32> = log.threads.iter().map(|t| t.tid).collect();
        assert_eq!(tids, [20]);
        let maps: Vec<(u32, &str)> = log.maps.iter().map(|m| (m.pid, m.text.as_str())).collect();
        assert_eq!(maps, [(40, "r-xp /bin/second\n")]);
        assert_eq!(
            (log.start_mono_ns, log.nr_cpus, log.sample_freq),
            (1, 2, 99)
        );
    }

    #[test]
    fn the_bytes_allowed_bound_the_window_too() {
        let mut all = a_window(60_000, 1 << 30, 10);
        let per_second = window(&mut all).bytes() / 10;
        assert_eq!(window(&mut all).chunks.len(), 10, "a minute holds them all");
        let mut w = a_window(60_000, 3 * per_second + 10, 10);
        assert!(window(&mut w).bytes() <= 3 * per_second + 10);
        assert_eq!(window(&mut w).chunks.len(), 3);
        assert_eq!(window(&mut w).chunks[0].first_ns, 7_000_000_001);
    }

    #[test]
    fn stacks_nothing_names_leave_the_map_then_memory() {
        let mut w = a_window(2_500, 1 << 30, 10);
        let win = window(&mut w);
        let in_map: Vec<MapStack> = (0..12).map(stack).collect();
        let mut evicted = win.stacks_to_evict(in_map);
        evicted.sort();
        let want: Vec<u64> = [0u64, 1, 2, 3, 4, 5, 6, 10, 11]
            .iter()
            .map(|id| id << 8)
            .collect();
        assert_eq!(evicted, want, "named by no record of the window");
        assert!(win.knows_key(7 << 8) && !win.knows_key(6 << 8));
        assert_eq!(win.stacks_known(), 12, "frames kept a pass longer");
        assert!(win.stacks_to_evict(Vec::new()).is_empty());
        assert_eq!(win.stacks_known(), 3, "then only the named ones");
    }

    #[test]
    fn a_stack_goes_once_the_window_moves_past_the_last_record_naming_it() {
        // Seconds 7, 8 and 9 kept, naming stacks 7, 8 and 9, all learned from the map.
        let mut w = a_window(2_500, 1 << 30, 10);
        let in_map: Vec<MapStack> = (7..10).map(stack).collect();
        assert!(window(&mut w).stacks_to_evict(in_map).is_empty());
        // Second 10 names stack 9 again, and second 11 stack 7 again: the window lets go
        // of seconds 7 and 8 (the first named 7, the second 8) and keeps 9 to 11.
        add_second(&mut w, 10, 9);
        add_second(&mut w, 11, 7);
        let win = window(&mut w);
        assert_eq!(win.chunks.len(), 3);
        assert_eq!(
            win.stacks_to_evict(Vec::new()),
            [8 << 8],
            "only 8 is named no more"
        );
        assert!(!win.knows_key(8 << 8) && win.knows_key(7 << 8) && win.knows_key(9 << 8));
        assert_eq!(win.stacks_known(), 3, "8's frames a pass longer");
        // A record in the ring buffer named it after all: it stays while named.
        let late = rec(RecordKind::Switch, 11_950_000_000, 20, 0, Some(8));
        win.note_record(&late);
        assert!(win.stacks_to_evict(Vec::new()).is_empty());
        assert_eq!(win.stacks_known(), 3);
        // Seconds 12 to 15, naming stack 99: the chunks naming 7, 8 and 9 go (second 12's
        // named 8, for the late record), and so do those stacks, from the map at one pass
        // and from memory at the next.
        for second in 12..16 {
            add_second(&mut w, second, 99);
        }
        let win = window(&mut w);
        assert_eq!(win.chunks[0].first_ns, 13_000_000_001);
        let mut evicted = win.stacks_to_evict(Vec::new());
        evicted.sort_unstable();
        assert_eq!(evicted, [7 << 8, 9 << 8], "8 was out of the map already");
        assert!(win.stacks_to_evict(Vec::new()).is_empty());
        assert_eq!(win.stacks_known(), 0);
    }

    #[test]
    fn a_stack_sent_in_the_ring_is_kept_while_the_window_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = a_window(2_500, 1 << 30, 10);
        let win = window(&mut w);
        // The window names stacks 7, 8 and 9; 8 came through the ring, 3 too but unnamed.
        win.note_stack(8, true, vec![0xffff_ffff_8100_0008]);
        win.note_stack(3, false, vec![0x3003]);
        let file = dir.path().join("snap");
        let in_map = [7, 9].into_iter().map(stack).collect();
        win.write(&file, in_map, SchedEnd::default()).unwrap();
        let log = parse_sched(&std::fs::read(&file).unwrap()).unwrap();
        let written: Vec<(u32, bool, Vec<u64>)> = log
            .stacks
            .iter()
            .map(|s| (s.id, s.kernel, s.addrs.clone()))
            .collect();
        assert_eq!(
            written,
            [
                (7, false, vec![0x1007]),
                (8, true, vec![0xffff_ffff_8100_0008]),
                (9, false, vec![0x1009])
            ]
        );
        // Not in the kernel's map, so nothing to delete there; the unnamed one is
        // forgotten a pass later (a record in the ring may still name it), the named
        // one kept.
        let evicted = win.stacks_to_evict(Vec::new());
        assert!(evicted.is_empty(), "{evicted:?}");
        assert_eq!(win.stacks_known(), 4, "7, 8, 9, and 3 a pass longer");
        assert!(win.stacks_to_evict(Vec::new()).is_empty());
        assert_eq!(win.stacks_known(), 3, "7, 8 and 9");
    }

    #[test]
    fn a_snapshot_that_cannot_be_written_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = a_window(2_500, 1 << 30, 3);
        let file = dir.path().join("missing-dir").join("snap");
        assert!(window(&mut w)
            .write(&file, Vec::new(), SchedEnd::default())
            .is_err());
        assert!(!file.exists());
        assert!(!dir.path().join("missing-dir").exists());
    }
}
