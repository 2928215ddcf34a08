//! Process and thread bookkeeping for the record pass: processes and
//! threads from fork, comm (exec) and exit records, with their lifetimes
//! (the rows kept with [`slowlab_model::lifetimes`], as the ETL reader's);
//! each process's executable memory maps (and the kernel's), which say in
//! which module an address lies; and the modules, created on the first map
//! of a path and classified by it.
//!
//! It does not decode records (`decode` does) nor turn addresses into
//! frames (`stacks` does, with [`find_map_near`]).

use slowlab_model::trace::{Module, ModuleIdx, ModuleKind, ProcIdx, StrIdx, ThreadIdx};

use super::Builder;

/// An executable mapping: addresses `start..end` hold `module` from its
/// file offset `pgoff` on.
#[derive(Clone, Copy, Debug)]
pub(super) struct Map {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) pgoff: u64,
    pub(super) module: ModuleIdx,
    /// The module's kind, kept here (in the padding) so that making a
    /// frame key from a map needs no look at the modules; `User` for the
    /// vDSO too, whose addresses are made relative as a file's are.
    pub(super) kind: ModuleKind,
}

/// Inserts `new` into sorted, non-overlapping `maps`, cutting what it covers.
fn insert_map(maps: &mut Vec<Map>, new: Map) {
    let i = maps.partition_point(|m| m.end <= new.start);
    let mut j = i;
    while j < maps.len() && maps[j].start < new.end {
        j += 1;
    }
    let mut repl = Vec::with_capacity(3);
    for m in &maps[i..j] {
        if m.start < new.start {
            repl.push(Map {
                end: new.start,
                ..*m
            });
        }
    }
    repl.push(new);
    for m in &maps[i..j] {
        if m.end > new.end {
            repl.push(Map {
                start: new.end,
                // Wrapping: a damaged file's offsets may overflow (the
                // frames of such a map are meaningless, not a panic).
                pgoff: m.pgoff.wrapping_add(new.end - m.start),
                ..*m
            });
        }
    }
    maps.splice(i..j, repl);
}

/// The index of the map of `maps` (sorted by start and apart, as
/// [`insert_map`] keeps them) that holds `addr`.
fn map_index(maps: &[Map], addr: u64) -> Option<usize> {
    let i = maps.partition_point(|m| m.start <= addr).checked_sub(1)?;
    (addr < maps.get(i)?.end).then_some(i)
}

/// The map of `maps` that holds `addr`, looking first at the map at
/// `*near` (where the frame before was found: a callchain's frames lie in
/// few maps, most of a kernel stack in one), and leaving there the index
/// of the map found. The same map as [`map_index`]'s: the map at `*near`
/// is it when it holds `addr` and the next starts past `addr`.
#[inline]
pub(super) fn find_map_near<'m>(maps: &'m [Map], addr: u64, near: &mut usize) -> Option<&'m Map> {
    if let Some(m) = maps.get(*near) {
        let next_past = maps.get(*near + 1).is_none_or(|n| n.start > addr);
        if m.start <= addr && addr < m.end && next_past {
            return Some(m);
        }
    }
    let i = map_index(maps, addr)?;
    *near = i;
    maps.get(i)
}

impl Builder {
    /// The module for a mapped path, created on first use.
    pub(super) fn module(&mut self, path: &str) -> ModuleIdx {
        let p = self.s(path);
        if let Some(&m) = self.module_by_path.get(&p) {
            return m;
        }
        let (name, kind) = classify_path(path);
        let name = self.s(&name);
        let m = ModuleIdx(self.t.modules.len() as u32);
        let build_id = self.build_ids.get(path.as_bytes()).cloned();
        self.t.modules.push(Module {
            name,
            path: p,
            kind,
            build_id,
            symbol_error: None,
        });
        self.module_by_path.insert(p, m);
        m
    }

    fn new_thread(
        &mut self,
        proc_: ProcIdx,
        tid: i32,
        comm: StrIdx,
        start: Option<u64>,
    ) -> ThreadIdx {
        self.last_thread = None;
        self.lifetimes
            .start_thread(&mut self.t, proc_, tid, comm, start)
    }

    fn process(&mut self, pid: i32) -> ProcIdx {
        if let Some(p) = self.lifetimes.process(pid) {
            return p;
        }
        let comm = if pid == 0 {
            self.s("swapper")
        } else {
            self.s(&format!(":{pid}"))
        };
        self.lifetimes
            .start_process(&mut self.t, pid, None, comm, None)
    }

    #[inline]
    pub(super) fn thread(&mut self, pid: i32, tid: i32) -> ThreadIdx {
        if let Some((p, t, th)) = self.last_thread {
            if (p, t) == (pid, tid) {
                return th;
            }
        }
        let th = self.thread_slow(pid, tid);
        self.last_thread = Some((pid, tid, th));
        th
    }

    fn thread_slow(&mut self, pid: i32, tid: i32) -> ThreadIdx {
        if let Some(th) = self.lifetimes.thread_in(&self.t, pid, tid) {
            return th;
        }
        let p = self.process(pid);
        let comm = self.t.processes[p.ix()].comm;
        self.new_thread(p, tid, comm, None)
    }

    pub(super) fn on_fork(&mut self, pid: i32, ppid: i32, tid: i32, ptid: i32, time: u64) {
        // perf synthesizes records for what already ran when it started,
        // with time 0: no fork time is known for those.
        let time = (time != 0).then_some(time);
        let parent_comm = self
            .lifetimes
            .thread(ptid)
            .map(|th| self.t.threads[th.ix()].comm)
            .or_else(|| {
                self.lifetimes
                    .process(ppid)
                    .map(|p| self.t.processes[p.ix()].comm)
            });
        if pid == tid {
            let comm = match parent_comm {
                Some(c) => c,
                None => self.s(&format!(":{pid}")),
            };
            let p = self
                .lifetimes
                .start_process(&mut self.t, pid, Some(ppid), comm, time);
            let inherited = self.maps.get(&ppid).cloned().unwrap_or_default();
            self.maps.insert(pid, inherited);
            self.new_thread(p, tid, comm, time);
        } else {
            let p = self.process(pid);
            let comm = parent_comm.unwrap_or(self.t.processes[p.ix()].comm);
            self.new_thread(p, tid, comm, time);
        }
    }

    pub(super) fn on_exit(&mut self, pid: i32, tid: i32, time: u64) {
        let th = self.thread(pid, tid);
        self.t.threads[th.ix()].end_ns = Some(time);
        if pid == tid {
            let p = self.t.threads[th.ix()].process;
            self.t.processes[p.ix()].end_ns = Some(time);
        }
    }

    pub(super) fn on_comm(&mut self, pid: i32, tid: i32, name: &str, exec: bool, time: u64) {
        let th = self.thread(pid, tid);
        let name = self.s(name);
        self.t.threads[th.ix()].comm = name;
        let p = self.t.threads[th.ix()].process;
        let proc_ = &mut self.t.processes[p.ix()];
        if pid == tid || exec {
            proc_.comm = name;
        }
        if exec {
            proc_.exec_ns = (time != 0).then_some(time);
            if let Some(m) = self.maps.get_mut(&pid) {
                m.clear();
            }
        }
    }

    pub(super) fn on_mmap(
        &mut self,
        pid: i32,
        start: u64,
        len: u64,
        pgoff: u64,
        path: &str,
        kernel: bool,
    ) {
        if len == 0 {
            return;
        }
        if kernel || pid == -1 {
            let module = if path.starts_with("[kernel.kallsyms]") {
                // perf's kernel map `[kernel.kallsyms]_text` carries the
                // address of `_text` at recording time as its page offset.
                if path == "[kernel.kallsyms]_text" {
                    self.t.meta.kernel_text = Some(pgoff);
                }
                self.kernel_module
            } else {
                self.module(path)
            };
            let m = Map {
                start,
                end: start.saturating_add(len),
                pgoff,
                module,
                kind: self.t.modules[module.ix()].kind,
            };
            insert_map(&mut self.kernel_maps, m);
            return;
        }
        let module = self.module(path);
        let m = Map {
            start,
            end: start.saturating_add(len),
            pgoff,
            module,
            // The vDSO's frames are relative to its mapping, as a file's are: one image in
            // every process, named from the running kernel's copy when it is the same.
            kind: match self.t.modules[module.ix()].kind {
                ModuleKind::Other if path == "[vdso]" => ModuleKind::User,
                kind => kind,
            },
        };
        insert_map(self.maps.entry(pid).or_default(), m);
    }
}

/// Short name and kind of a mapped path.
fn classify_path(path: &str) -> (String, ModuleKind) {
    if path == "[kernel.kallsyms]" || path.starts_with("[kernel.kallsyms]") {
        return ("[kernel.kallsyms]".into(), ModuleKind::Kernel);
    }
    if path == "[unknown]" {
        return (path.into(), ModuleKind::Other);
    }
    if path.starts_with('[') || path.starts_with("//") || path.starts_with("/memfd:") {
        return (path.into(), ModuleKind::Other);
    }
    let base = path.rsplit('/').next().unwrap_or(path);
    if let Some(m) = base
        .strip_suffix(".ko")
        .or_else(|| base.strip_suffix(".ko.xz"))
        .or_else(|| base.strip_suffix(".ko.zst"))
    {
        return (format!("[{m}]"), ModuleKind::KernelModule);
    }
    if path.starts_with('/') {
        (base.into(), ModuleKind::User)
    } else {
        (path.into(), ModuleKind::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(start: u64, end: u64, pgoff: u64, module: u32) -> Map {
        Map {
            start,
            end,
            pgoff,
            module: ModuleIdx(module),
            kind: ModuleKind::User,
        }
    }

    #[test]
    fn overlapping_mmap_cuts_old_mapping() {
        let mut maps = vec![m(0x1000, 0x5000, 0, 1)];
        insert_map(&mut maps, m(0x2000, 0x3000, 0x100, 2));
        let got: Vec<_> = maps
            .iter()
            .map(|x| (x.start, x.end, x.pgoff, x.module.0))
            .collect();
        assert_eq!(
            got,
            vec![
                (0x1000, 0x2000, 0, 1),
                (0x2000, 0x3000, 0x100, 2),
                (0x3000, 0x5000, 0x2000, 1)
            ]
        );
        let find_map = |addr| map_index(&maps, addr).map(|i| &maps[i]);
        assert_eq!(find_map(0x2fff).unwrap().module.0, 2);
        assert_eq!(find_map(0x4000).unwrap().module.0, 1);
        assert!(find_map(0x5000).is_none());
        assert!(find_map(0x10).is_none());
    }

    #[test]
    fn the_map_found_near_the_last_is_the_map_found() {
        // Maps inserted over each other (cut, adjacent, with gaps), and
        // addresses looked up in a random walk from wherever the last was
        // found: the same map as a search from scratch, every time.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut maps = Vec::new();
        for i in 0..60 {
            let start = next(1 << 16) * 16;
            let len = 1 + next(1 << 12) * 16;
            insert_map(&mut maps, m(start, start + len, 0, i));
        }
        assert!(maps.windows(2).all(|w| w[0].end <= w[1].start));
        let mut near = 0;
        for _ in 0..20_000 {
            let addr = next((1 << 20) + (1 << 12));
            let want = map_index(&maps, addr).map(|i| (maps[i].start, maps[i].module));
            let got = find_map_near(&maps, addr, &mut near).map(|m| (m.start, m.module));
            assert_eq!(got, want, "{addr:#x}");
        }
        assert!(find_map_near(&[], 5, &mut near).is_none());
    }

    #[test]
    fn synthesized_forks_and_comms_at_time_zero_have_no_start() {
        let mut b = Builder::new();
        // perf's records for a shell that ran before the recording began…
        b.on_fork(100, 1, 100, 1, 0);
        b.on_comm(100, 100, "sh", true, 0);
        // …and for a child it forks while recording.
        b.on_fork(101, 100, 101, 100, 5_000);
        b.on_exit(100, 100, 9_000);
        let sh = &b.t.processes[b.lifetimes.process(100).unwrap().ix()];
        assert_eq!(
            (sh.start_ns, sh.exec_ns, sh.end_ns),
            (None, None, Some(9_000))
        );
        let child = &b.t.processes[b.lifetimes.process(101).unwrap().ix()];
        assert_eq!(child.start_ns, Some(5_000));
        assert_eq!(child.ppid, Some(100));
    }

    #[test]
    fn classifies_paths() {
        assert_eq!(classify_path("/usr/lib/libc.so.6").0, "libc.so.6");
        assert_eq!(classify_path("/usr/lib/libc.so.6").1, ModuleKind::User);
        assert_eq!(classify_path("[vdso]").1, ModuleKind::Other);
        assert_eq!(classify_path("//anon").1, ModuleKind::Other);
        assert_eq!(
            classify_path("/lib/modules/6.1/kernel/fs/ext4/ext4.ko").0,
            "[ext4]"
        );
    }
}
