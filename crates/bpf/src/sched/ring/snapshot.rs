//! A snapshot of a ring [`Window`]: the window written as a whole recording (its header,
//! the threads and mappings alive or seen within it, the waits older than it moved to its
//! start, its chunks unpacked or read back from the spill, their stacks and an END),
//! through a partial file renamed once whole. It does not decide what the window keeps
//! (`super`).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use slowlab_model::bundle::partial_file;
use slowlab_model::host_steal::CpuTimes;

use super::packed::Unpacker;
use super::{MapStack, SnapshotInfo, Stored, Window};
use crate::sched::format::SchedEnd;

impl Window {
    /// Writes the window as a recording into `path` (through `PATH.partial`, renamed once
    /// whole; removed on failure), with `end`'s counts of losses and its stop time; the
    /// caller has cut first. `in_map`: the kernel's stacks now, learned first. `about`:
    /// the process this snapshot is about (pid and arguments), named as its command in
    /// place of the recording's, so that its analysis starts from it. `cpu_now`: the
    /// machine's CPU time counters now, for the window's steal time.
    pub(crate) fn write(
        &mut self,
        path: &Path,
        in_map: Vec<MapStack>,
        end: SchedEnd,
        about: Option<&(u32, Vec<String>)>,
        cpu_now: Option<CpuTimes>,
    ) -> io::Result<SnapshotInfo> {
        self.stacks.learn(in_map);
        let partial = partial_file(path);
        let cpu_times = cpu_now
            .zip(self.cpu_times.front())
            .and_then(|(now, (_, start))| now.since(*start));
        let result = self
            .write_to(&partial, end, about, cpu_times)
            .and_then(|info| {
                std::fs::rename(&partial, path)?;
                Ok(info)
            });
        if result.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        result
    }

    fn write_to(
        &self,
        file: &Path,
        end: SchedEnd,
        about: Option<&(u32, Vec<String>)>,
        cpu_times: Option<CpuTimes>,
    ) -> io::Result<SnapshotInfo> {
        let out = BufWriter::with_capacity(1 << 20, File::create(file)?);
        let mut w = self.header.writer(out)?;
        if let Some((pid, args)) = about.or(self.command.as_ref()) {
            w.command(*pid, args)?;
        }
        if let Some(times) = cpu_times {
            w.steal(times)?;
        }
        // What exited before the window, and `trim` has not let go of yet, stays out.
        let since = self.oldest_ns();
        let mut threads: Vec<_> = self
            .threads
            .iter()
            .filter(|(_, t)| t.seen_since(since))
            .collect();
        threads.sort_by_key(|(tid, _)| **tid);
        for (tid, t) in threads {
            w.thread(t.pid, *tid, &t.comm)?;
        }
        let mut mappings: Vec<_> = self
            .mappings
            .iter()
            .filter(|(pid, _)| self.exited.get(pid).is_none_or(|ns| *ns >= since))
            .collect();
        mappings.sort_by_key(|(pid, _)| **pid);
        for (pid, text) in mappings {
            w.maps(*pid, text)?;
        }
        // The threads blocked since before the window: their blocking switches first, at
        // its start, each after its wait syscall's entry (which came before the switch).
        let mut waiting: Vec<_> = self
            .waits
            .iter()
            .filter(|(_, w)| w.time_ns < since)
            .collect();
        waiting.sort_by_key(|(tid, w)| (w.time_ns, **tid));
        for (tid, wait) in waiting {
            if let Some(call) = self.calls.get(tid).filter(|c| c.time_ns <= wait.time_ns) {
                w.record(&call.record_at(*tid, since))?;
            }
            w.record(&wait.record_at(*tid, since))?;
        }
        let mut info = SnapshotInfo {
            cpu_times,
            ..SnapshotInfo::default()
        };
        let mut unpacker = Unpacker::new();
        let mut spilled = Vec::new();
        for c in &self.chunks {
            let raw = match (&c.bytes, &self.spill) {
                (Stored::Memory(packed), _) => unpacker.unpack(packed)?,
                (Stored::Spilled { at, len }, Some(spill)) => {
                    spilled.resize(*len, 0);
                    spill.file.read_exact_at(&mut spilled, *at)?;
                    &spilled
                }
                (Stored::Spilled { .. }, None) => {
                    return Err(io::Error::other("a spilled chunk without its spill file"))
                }
            };
            w.sections(raw, c.records)?;
            if info.first_ns == 0 {
                info.first_ns = c.first_ns;
            }
            info.last_ns = info.last_ns.max(c.last_ns);
        }
        for id in self.stacks.named() {
            if let Some((kernel, addrs)) = self.stacks.frames(id) {
                w.stack(id, kernel, addrs)?;
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
