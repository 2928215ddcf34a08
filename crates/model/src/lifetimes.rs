//! The process and thread tables of a [`Trace`] as a reader fills them, in
//! event order: one row per lifetime, a reused pid or tid getting a new row
//! that becomes its *current* one, each thread listed in its process's
//! `threads`. Both readers (perf.data's fork, comm and exit records,
//! Windows' process and thread events) keep their tables with it.
//!
//! Here rather than in a reader because both readers need it and neither
//! depends on the other; and it is the model's own bookkeeping (it keeps
//! the invariants of [`Trace::processes`] and [`Trace::threads`]), with no
//! I/O and no analysis, which is this crate's rule. It does not decide what
//! an event means: when a row starts, ends, is renamed or is made up for an
//! id seen before its start is the reader's call, as are the placeholder
//! names and the times.

use std::collections::HashMap;

use rustc_hash::FxBuildHasher;

use crate::trace::{ProcIdx, Process, StrIdx, Thread, ThreadIdx, Trace};

/// The current row of each pid and tid while a trace's tables are built.
#[derive(Clone, Debug, Default)]
pub struct Lifetimes {
    processes: HashMap<i32, ProcIdx, FxBuildHasher>,
    threads: HashMap<i32, ThreadIdx, FxBuildHasher>,
}

impl Lifetimes {
    /// The current row of process `pid`, if it has one.
    #[inline]
    pub fn process(&self, pid: i32) -> Option<ProcIdx> {
        self.processes.get(&pid).copied()
    }

    /// The current row of thread `tid`, if it has one.
    #[inline]
    pub fn thread(&self, tid: i32) -> Option<ThreadIdx> {
        self.threads.get(&tid).copied()
    }

    /// The current row of thread `tid` if it belongs to a process `pid` (a
    /// tid met again in another process is a new thread).
    #[inline]
    pub fn thread_in(&self, t: &Trace, pid: i32, tid: i32) -> Option<ThreadIdx> {
        let th = self.thread(tid)?;
        let p = t.threads[th.ix()].process;
        (t.processes[p.ix()].pid == pid).then_some(th)
    }

    /// A new row for process `pid`, its current one from now on, started
    /// at `start_ns` (`None`: before the trace, or not known) without
    /// threads.
    pub fn start_process(
        &mut self,
        t: &mut Trace,
        pid: i32,
        ppid: Option<i32>,
        comm: StrIdx,
        start_ns: Option<u64>,
    ) -> ProcIdx {
        let p = ProcIdx(t.processes.len() as u32);
        t.processes.push(Process {
            pid,
            ppid,
            comm,
            start_ns,
            exec_ns: None,
            end_ns: None,
            threads: Vec::new(),
        });
        self.processes.insert(pid, p);
        p
    }

    /// A new row for thread `tid` of `process`, its current one from now
    /// on, started at `start_ns`, and listed among the process's threads.
    pub fn start_thread(
        &mut self,
        t: &mut Trace,
        process: ProcIdx,
        tid: i32,
        comm: StrIdx,
        start_ns: Option<u64>,
    ) -> ThreadIdx {
        let th = ThreadIdx(t.threads.len() as u32);
        t.threads.push(Thread {
            tid,
            process,
            comm,
            start_ns,
            end_ns: None,
        });
        t.processes[process.ix()].threads.push(th);
        self.threads.insert(tid, th);
        th
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_pid_or_tid_gets_a_new_current_row() {
        let mut t = Trace::default();
        let mut l = Lifetimes::default();
        let comm = StrIdx(0);
        let p1 = l.start_process(&mut t, 10, Some(1), comm, None);
        let a = l.start_thread(&mut t, p1, 10, comm, None);
        let b = l.start_thread(&mut t, p1, 11, comm, Some(5));
        assert_eq!(t.processes[p1.ix()].threads, vec![a, b]);
        assert_eq!(l.thread_in(&t, 10, 11), Some(b));
        assert_eq!(l.thread_in(&t, 12, 11), None);
        assert_eq!(l.thread(99), None);

        // Pid 10 comes back as a new process, and tid 11 in another one.
        let p2 = l.start_process(&mut t, 10, Some(1), comm, Some(20));
        let q = l.start_process(&mut t, 12, None, comm, None);
        let c = l.start_thread(&mut t, q, 11, comm, Some(30));
        assert_ne!(p1, p2);
        assert_eq!((l.process(10), l.process(12)), (Some(p2), Some(q)));
        assert_eq!((l.thread(10), l.thread(11)), (Some(a), Some(c)));
        assert_eq!(l.thread_in(&t, 10, 11), None);
        assert_eq!(l.thread_in(&t, 12, 11), Some(c));
        assert_eq!(t.processes.len(), 3);
        assert_eq!(t.threads.len(), 3);
        assert_eq!(t.processes[p1.ix()].threads, vec![a, b]);
        assert!(t.processes[p2.ix()].threads.is_empty());
        assert_eq!(t.processes[q.ix()].threads, vec![c]);
        assert_eq!(t.threads[c.ix()].start_ns, Some(30));
        assert_eq!(t.processes[p2.ix()].start_ns, Some(20));
    }
}
