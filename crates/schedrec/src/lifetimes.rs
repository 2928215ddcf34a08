//! Process and thread rows of the trace from a scheduler recording: the threads /proc
//! named (alive at the start, or first seen later), then forks, execs, exits and renames in
//! time order. A tid seen again after its exit gets a new row, as in the perf reader.
//!
//! It does not read stacks or events other than lifetimes.

use rustc_hash::FxHashMap;
use slowlab_bpf::sched::SchedLog;
use slowlab_model::trace::{ProcIdx, Process, StrIdx, Thread, ThreadIdx, Trace};

pub(crate) struct Lifetimes {
    /// What /proc said of each tid: its pid and name.
    named: FxHashMap<u32, (u32, String)>,
    /// The pid of each tid, as far as known.
    pids: FxHashMap<u32, u32>,
    /// The current row of each tid and pid.
    threads: FxHashMap<u32, ThreadIdx>,
    procs: FxHashMap<u32, ProcIdx>,
    strings: FxHashMap<String, StrIdx>,
}

impl Lifetimes {
    pub(crate) fn new(log: &SchedLog) -> Lifetimes {
        let mut named = FxHashMap::default();
        let mut pids = FxHashMap::default();
        for t in &log.threads {
            named.insert(t.tid, (t.pid, t.comm.clone()));
            pids.insert(t.tid, t.pid);
        }
        Lifetimes {
            named,
            pids,
            threads: FxHashMap::default(),
            procs: FxHashMap::default(),
            strings: FxHashMap::default(),
        }
    }

    /// `text` in the trace's strings, added once.
    pub(crate) fn s(&mut self, trace: &mut Trace, text: &str) -> StrIdx {
        if let Some(&i) = self.strings.get(text) {
            return i;
        }
        let i = StrIdx(trace.strings.len() as u32);
        trace.strings.push(text.to_string());
        self.strings.insert(text.to_string(), i);
        i
    }

    pub(crate) fn note_pid(&mut self, tid: u32, pid: u32) {
        self.pids.entry(tid).or_insert(pid);
    }

    /// The pid of `tid` (itself when nothing says otherwise).
    pub(crate) fn pid_of(&self, tid: u32) -> u32 {
        self.pids.get(&tid).copied().unwrap_or(tid)
    }

    fn comm_of(&self, tid: u32) -> Option<&str> {
        if tid == 0 {
            return Some("swapper");
        }
        self.named.get(&tid).map(|(_, c)| c.as_str())
    }

    fn process(&mut self, trace: &mut Trace, pid: u32, comm: StrIdx) -> ProcIdx {
        if let Some(&p) = self.procs.get(&pid) {
            return p;
        }
        let p = ProcIdx(trace.processes.len() as u32);
        trace.processes.push(Process {
            pid: pid as i32,
            ppid: None,
            comm,
            start_ns: None,
            exec_ns: None,
            end_ns: None,
            threads: Vec::new(),
        });
        self.procs.insert(pid, p);
        p
    }

    fn new_thread(&mut self, trace: &mut Trace, tid: u32, pid: u32, comm: StrIdx) -> ThreadIdx {
        let process = self.process(trace, pid, comm);
        let t = ThreadIdx(trace.threads.len() as u32);
        trace.threads.push(Thread {
            tid: tid as i32,
            process,
            comm,
            start_ns: None,
            end_ns: None,
        });
        trace.processes[process.ix()].threads.push(t);
        self.threads.insert(tid, t);
        t
    }

    /// The current row of `tid`, made (alive since before the trace) when there is none.
    pub(crate) fn thread(&mut self, trace: &mut Trace, tid: u32, _t: u64) -> ThreadIdx {
        if let Some(&t) = self.threads.get(&tid) {
            return t;
        }
        let pid = self.pid_of(tid);
        // A process first seen through another thread than its leader (a worker named
        // otherwise, `slowlab-sched`) is still named after its leader.
        if !self.procs.contains_key(&pid) {
            if let Some(leader) = self.comm_of(pid).map(str::to_string) {
                let leader = self.s(trace, &leader);
                self.process(trace, pid, leader);
            }
        }
        let comm = self
            .comm_of(tid)
            .or_else(|| self.comm_of(pid))
            .unwrap_or("[unknown]")
            .to_string();
        let comm = self.s(trace, &comm);
        self.new_thread(trace, tid, pid, comm)
    }

    /// Rows for the threads /proc named that no record mentioned (alive all along, never
    /// run: asleep, or hung), each in its process.
    pub(crate) fn quiet_threads(&mut self, trace: &mut Trace, log: &SchedLog) {
        let with_rows: rustc_hash::FxHashSet<i32> = trace.threads.iter().map(|t| t.tid).collect();
        for t in &log.threads {
            if !with_rows.contains(&(t.tid as i32)) {
                let comm = self.s(trace, &t.comm);
                self.new_thread(trace, t.tid, t.pid, comm);
            }
        }
    }

    pub(crate) fn fork(&mut self, trace: &mut Trace, parent: u32, child: u32, pid: u32, t: u64) {
        let parent_row = self.thread(trace, parent, t);
        let comm = trace.threads[parent_row.ix()].comm;
        let ppid = trace.processes[trace.threads[parent_row.ix()].process.ix()].pid;
        self.pids.insert(child, pid);
        self.threads.remove(&child);
        if child == pid {
            self.procs.remove(&pid);
            let p = self.process(trace, pid, comm);
            trace.processes[p.ix()].ppid = Some(ppid);
            trace.processes[p.ix()].start_ns = Some(t);
        }
        let row = self.new_thread(trace, child, pid, comm);
        trace.threads[row.ix()].start_ns = Some(t);
    }

    pub(crate) fn exec(
        &mut self,
        trace: &mut Trace,
        tid: u32,
        pid: u32,
        comm: Option<&str>,
        t: u64,
    ) {
        self.pids.insert(tid, pid);
        let row = self.thread(trace, tid, t);
        let process = trace.threads[row.ix()].process;
        if let Some(c) = comm {
            let c = self.s(trace, c);
            trace.threads[row.ix()].comm = c;
            trace.processes[process.ix()].comm = c;
        }
        trace.processes[process.ix()].exec_ns = Some(t);
    }

    pub(crate) fn exit(&mut self, trace: &mut Trace, tid: u32, pid: u32, t: u64) {
        self.pids.insert(tid, pid);
        let row = self.thread(trace, tid, t);
        // The row stays the tid's until a fork reuses it: the exiting thread is still
        // switched out once after this.
        trace.threads[row.ix()].end_ns = Some(t);
        if tid == pid {
            let process = trace.threads[row.ix()].process;
            trace.processes[process.ix()].end_ns = Some(t);
        }
    }

    pub(crate) fn rename(
        &mut self,
        trace: &mut Trace,
        tid: u32,
        pid: u32,
        comm: Option<&str>,
        t: u64,
    ) {
        self.pids.entry(tid).or_insert(pid);
        let row = self.thread(trace, tid, t);
        if let Some(c) = comm {
            let c = self.s(trace, c);
            trace.threads[row.ix()].comm = c;
            if tid == pid {
                let process = trace.threads[row.ix()].process;
                trace.processes[process.ix()].comm = c;
            }
        }
    }
}
