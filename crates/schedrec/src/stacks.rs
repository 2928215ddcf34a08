//! Stacks of a scheduler recording into the model's frame and stack tables: a record's
//! user stack (outermost first) then its kernel stack make one path of the prefix tree.
//! Kernel frames keep their address in `[kernel.kallsyms]`; user frames are placed in the
//! file their process had mapped at the address (the recording's MAPS sections), at its
//! file offset, as perf's reader places them; all are named afterwards by `slowlab_perf`'s
//! symbolizer (`crate::build_trace`), so a bpf recording's frames get the same names as a
//! perf recording's (separate debug files, debuginfod, kernel modules, the hints).
//!
//! It does not read /proc/PID (the recorder did) or unwind: the kernel's stack map holds
//! frame-pointer stacks. A user address outside every recorded mapping (its process exited
//! before the recorder read its maps) stays an address in the `[unknown]` module.
//! The recorder reads a process's mappings at its exec and again at its user stacks in
//! the next 20 ms: a read is completed by the later ones of the same image.

use rustc_hash::FxHashMap;
use slowlab_bpf::sched::format::{parse_maps_line, RecordKind};
use slowlab_bpf::sched::SchedLog;
use slowlab_model::trace::{
    Frame, FrameIdx, FuncIdx, Function, Module, ModuleIdx, ModuleKind, StackIdx, StackNode, StrIdx,
    Trace,
};

/// One executable mapping of a process.
#[derive(Clone)]
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    path: String,
}

/// A process's mappings from a time on.
struct MapsVersion {
    from_ns: u64,
    maps: Vec<Mapping>,
}

fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|l| {
            let m = parse_maps_line(l)?;
            Some(Mapping {
                start: m.start,
                end: m.end,
                offset: m.offset,
                path: m.path?.to_string(),
            })
        })
        .collect()
}

/// Each process's exec times (its pid's EXEC records), in order.
fn exec_times(log: &SchedLog) -> FxHashMap<u32, Vec<u64>> {
    let mut execs: FxHashMap<u32, Vec<u64>> = FxHashMap::default();
    for r in log.records.of_kind(RecordKind::Exec) {
        execs.entry(r.a).or_default().push(r.time_ns);
    }
    execs
}

/// Adds to each read of a process's mappings those of its next read of the same image (no
/// exec between) that overlap none of its own, and so on to the last: the recorder reads
/// a process at its exec, before the loader has mapped the libraries, and again at its
/// user stacks after; a stack from between uses an early read, and finds the libraries in
/// a later one.
fn complete_from_later_reads(
    maps: &mut FxHashMap<u32, Vec<MapsVersion>>,
    execs: &FxHashMap<u32, Vec<u64>>,
) {
    for (pid, versions) in maps.iter_mut() {
        let execs = execs.get(pid).map_or(&[][..], Vec::as_slice);
        for i in (0..versions.len().saturating_sub(1)).rev() {
            let (from, to) = (versions[i].from_ns, versions[i + 1].from_ns);
            if execs.iter().any(|&t| t > from && t <= to) {
                continue;
            }
            let later: Vec<Mapping> = versions[i + 1]
                .maps
                .iter()
                .filter(|m| {
                    !versions[i]
                        .maps
                        .iter()
                        .any(|own| m.start < own.end && own.start < m.end)
                })
                .cloned()
                .collect();
            versions[i].maps.extend(later);
        }
    }
}

/// A record's stack as the recording names it: (pid when there is a user stack, kernel
/// stack id, user stack id, sampled).
type StackKey = (u32, Option<u32>, Option<u32>, bool);

pub(crate) struct Stacks<'a> {
    stacks: FxHashMap<u32, &'a [u64]>,
    maps: FxHashMap<u32, Vec<MapsVersion>>,
    cache: FxHashMap<StackKey, Option<StackIdx>>,
    frames: FxHashMap<(ModuleIdx, u64), FrameIdx>,
    nodes: FxHashMap<(u32, FrameIdx), StackIdx>,
    modules: FxHashMap<String, ModuleIdx>,
    functions: FxHashMap<(ModuleIdx, String), FuncIdx>,
    strings: FxHashMap<String, StrIdx>,
}

const KERNEL: &str = "[kernel.kallsyms]";
const UNKNOWN: &str = "[unknown]";

impl<'a> Stacks<'a> {
    pub(crate) fn new(log: &'a SchedLog) -> Stacks<'a> {
        let stacks = log
            .stacks
            .iter()
            .map(|s| (s.id, s.addrs.as_slice()))
            .collect();
        let mut maps: FxHashMap<u32, Vec<MapsVersion>> = FxHashMap::default();
        for m in &log.maps {
            let from_ns = log.records.time_at(m.from_record).unwrap_or(u64::MAX);
            let mappings = parse_maps(&m.text);
            // A read of a process that had exited, not yet reaped (recorders before
            // 2026-11-29 wrote it): it says nothing of what the process ran.
            if mappings.is_empty() {
                continue;
            }
            maps.entry(m.pid).or_default().push(MapsVersion {
                from_ns,
                maps: mappings,
            });
        }
        complete_from_later_reads(&mut maps, &exec_times(log));
        Stacks {
            stacks,
            maps,
            cache: FxHashMap::default(),
            frames: FxHashMap::default(),
            nodes: FxHashMap::default(),
            modules: FxHashMap::default(),
            functions: FxHashMap::default(),
            strings: FxHashMap::default(),
        }
    }

    fn s(&mut self, trace: &mut Trace, text: &str) -> StrIdx {
        if let Some(&i) = self.strings.get(text) {
            return i;
        }
        let i = StrIdx(trace.strings.len() as u32);
        trace.strings.push(text.to_string());
        self.strings.insert(text.to_string(), i);
        i
    }

    fn module(&mut self, trace: &mut Trace, path: &str, kind: ModuleKind) -> ModuleIdx {
        if let Some(&m) = self.modules.get(path) {
            return m;
        }
        let name = match kind {
            ModuleKind::User => path.rsplit('/').next().unwrap_or(path).to_string(),
            _ => path.to_string(),
        };
        let m = ModuleIdx(trace.modules.len() as u32);
        let (name, path_s) = (self.s(trace, &name), self.s(trace, path));
        trace.modules.push(Module {
            name,
            path: path_s,
            kind,
            build_id: None,
            symbol_error: None,
        });
        self.modules.insert(path.to_string(), m);
        m
    }

    fn function(&mut self, trace: &mut Trace, module: ModuleIdx, name: &str) -> FuncIdx {
        if let Some(&f) = self.functions.get(&(module, name.to_string())) {
            return f;
        }
        let kernel = matches!(
            trace.modules[module.ix()].kind,
            ModuleKind::Kernel | ModuleKind::KernelModule
        );
        let f = FuncIdx(trace.functions.len() as u32);
        let name_s = self.s(trace, name);
        trace.functions.push(Function {
            name: name_s,
            module,
            kernel,
        });
        self.functions.insert((module, name.to_string()), f);
        f
    }

    fn kernel_frame(&mut self, trace: &mut Trace, addr: u64) -> FrameIdx {
        let module = self.module(trace, KERNEL, ModuleKind::Kernel);
        if let Some(&f) = self.frames.get(&(module, addr)) {
            return f;
        }
        let function = self.function(trace, module, UNKNOWN);
        let f = FrameIdx(trace.frames.len() as u32);
        trace.frames.push(Frame {
            module,
            address: addr,
            function,
            kernel: true,
        });
        self.frames.insert((module, addr), f);
        f
    }

    fn user_frame(&mut self, trace: &mut Trace, pid: u32, addr: u64, t: u64) -> FrameIdx {
        let found = self.maps.get(&pid).and_then(|versions| {
            let version = versions
                .iter()
                .rev()
                .find(|v| v.from_ns <= t)
                .or_else(|| versions.first())?;
            version
                .maps
                .iter()
                .find(|m| addr >= m.start && addr < m.end)
                .map(|m| (m.path.clone(), addr - m.start + m.offset))
        });
        let (module, address) = match found {
            // The vDSO is no file: named, if at all, from the running kernel's copy.
            Some((path, offset)) if path == "[vdso]" => {
                (self.module(trace, &path, ModuleKind::Other), offset)
            }
            Some((path, offset)) => (self.module(trace, &path, ModuleKind::User), offset),
            None => (self.module(trace, UNKNOWN, ModuleKind::Other), addr),
        };
        if let Some(&f) = self.frames.get(&(module, address)) {
            return f;
        }
        let function = self.function(trace, module, UNKNOWN);
        let f = FrameIdx(trace.frames.len() as u32);
        trace.frames.push(Frame {
            module,
            address,
            function,
            kernel: false,
        });
        self.frames.insert((module, address), f);
        f
    }

    /// The stack of a record: `pid`'s user stack `ustack` under the kernel stack `kstack`.
    /// `sampled`: the innermost address is where the CPU was, not a return address.
    pub(crate) fn stack(
        &mut self,
        trace: &mut Trace,
        pid: u32,
        kstack: Option<u32>,
        ustack: Option<u32>,
        t: u64,
        sampled: bool,
    ) -> Option<StackIdx> {
        let key = (
            if ustack.is_some() { pid } else { 0 },
            kstack,
            ustack,
            sampled,
        );
        if let Some(&s) = self.cache.get(&key) {
            return s;
        }
        let user: &'a [u64] = ustack
            .and_then(|id| self.stacks.get(&id).copied())
            .unwrap_or(&[]);
        let kernel: &'a [u64] = kstack
            .and_then(|id| self.stacks.get(&id).copied())
            .unwrap_or(&[]);
        // Return addresses point past their call: step back into it.
        let fix = |i: usize, a: u64, innermost_sampled: bool| {
            if i == 0 && innermost_sampled {
                a
            } else {
                a.saturating_sub(1)
            }
        };
        let mut frames: Vec<FrameIdx> = Vec::with_capacity(user.len() + kernel.len());
        for (i, &a) in user.iter().enumerate().rev() {
            let a = fix(i, a, sampled && kernel.is_empty());
            frames.push(self.user_frame(trace, pid, a, t));
        }
        for (i, &a) in kernel.iter().enumerate().rev() {
            let a = fix(i, a, sampled);
            frames.push(self.kernel_frame(trace, a));
        }
        let mut parent: Option<StackIdx> = None;
        for f in frames {
            let pkey = parent.map_or(u32::MAX, |p| p.0);
            parent = Some(match self.nodes.get(&(pkey, f)) {
                Some(&n) => n,
                None => {
                    let n = StackIdx(trace.stacks.len() as u32);
                    trace.stacks.push(StackNode::new(parent, f));
                    self.nodes.insert((pkey, f), n);
                    n
                }
            });
        }
        self.cache.insert(key, parent);
        parent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(from_ns: u64, text: &str) -> MapsVersion {
        MapsVersion {
            from_ns,
            maps: parse_maps(text),
        }
    }

    fn paths(v: &MapsVersion) -> Vec<&str> {
        v.maps.iter().map(|m| m.path.as_str()).collect()
    }

    #[test]
    fn a_read_at_exec_is_completed_by_the_next_read_of_the_same_image_only() {
        let at_exec = "1000-2000 r-xp 00001000 08:01 7 /bin/spin\n";
        let later = "1000-2000 r-xp 00001000 08:01 7 /bin/spin\n\
                     1800-2800 r-xp 00000000 08:01 8 /lib/overlapping.so\n\
                     9000-a000 r-xp 00028000 08:01 9 /lib/libc.so.6\n";
        let mut maps = FxHashMap::default();
        maps.insert(10, vec![version(100, at_exec), version(200, later)]);
        // pid 11 exec'd again between its two reads: another image, nothing carried.
        maps.insert(11, vec![version(100, at_exec), version(200, later)]);
        let execs = [(10, vec![100]), (11, vec![100, 150])]
            .into_iter()
            .collect();
        complete_from_later_reads(&mut maps, &execs);
        assert_eq!(paths(&maps[&10][0]), ["/bin/spin", "/lib/libc.so.6"]);
        assert_eq!(paths(&maps[&10][1]).len(), 3, "the later read is as it was");
        assert_eq!(paths(&maps[&11][0]), ["/bin/spin"]);
    }
}
