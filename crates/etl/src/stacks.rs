//! Code addresses to the trace model's modules, frames and stacks, for an
//! ETL trace: the images each process loaded (and the kernel's, shared by
//! all) say which module an address is in; a frame is named
//! `module+0xoffset` (offset from the image base; [`crate::symbols`] names
//! them from PDBs when the user passes a symbol path); and the stack events are joined to the events they belong to.
//!
//! ETW records a stack after its event, as a `StackWalk/Stack` event with the
//! frames, or (Windows 8 and later) as stack-key references
//! (`StackKeyKernel`, `StackKeyUser`) whose frames come in a `KeyRundown` or
//! `KeyDelete` event, often at the end of the trace. Both name their event
//! by its timestamp and thread, which is the join key here. A kernel-mode
//! event's user-mode half is walked later (when the thread returns to user
//! mode) under the same key. Stacks of events whose key matches no stack
//! stay empty (the sample's own address is then its one frame).

use std::collections::HashMap;

use slowlab_model::trace::{
    FrameIdx, FuncIdx, Function, Module, ModuleIdx, ModuleKind, StackIdx, StackNode, StrIdx, Trace,
};

/// One loaded image: `base..end` holds `module`.
#[derive(Clone, Copy, Debug)]
struct Image {
    base: u64,
    end: u64,
    module: ModuleIdx,
}

/// Builds modules, frames and stacks into a [`Trace`].
#[derive(Default)]
pub struct StackBuilder {
    strings: HashMap<String, StrIdx>,
    module_by_path: HashMap<String, ModuleIdx>,
    /// Images per pid, sorted by base; pid 0 and kernel-space loads go to
    /// `kernel`.
    images: HashMap<u32, Vec<Image>>,
    kernel: Vec<Image>,
    unknown_module: Option<ModuleIdx>,
    frames: HashMap<(ModuleIdx, u64), FrameIdx>,
    nodes: HashMap<(Option<StackIdx>, FrameIdx), StackIdx>,
    /// Whether the trace's addresses are 32-bit (kernel space from 2 GiB).
    pub pointer_size: u8,
    /// Distinct addresses in no known image.
    pub unmapped: u64,
}

/// Whether `addr` is a kernel-space address for the pointer size.
pub fn is_kernel_address(addr: u64, pointer_size: u8) -> bool {
    if pointer_size == 4 {
        addr >= 0x8000_0000 && addr <= u32::MAX as u64
    } else {
        addr >= 0xffff_8000_0000_0000
    }
}

fn insert_sorted(images: &mut Vec<Image>, image: Image) {
    let at = images.partition_point(|i| i.base < image.base);
    if images.get(at).is_some_and(|i| i.base == image.base) {
        images[at] = image; // the same range loaded again (rundown after load)
    } else {
        images.insert(at, image);
    }
}

fn find(images: &[Image], addr: u64) -> Option<Image> {
    let at = images.partition_point(|i| i.base <= addr);
    let image = *images.get(at.checked_sub(1)?)?;
    (addr < image.end).then_some(image)
}

/// The file name of a Windows path (after the last `\` or `/`).
pub fn file_name(path: &str) -> &str {
    path.rsplit(['\\', '/']).next().unwrap_or(path)
}

impl StackBuilder {
    /// A builder for addresses of the given pointer size (4 or 8).
    pub fn new(pointer_size: u8) -> Self {
        StackBuilder {
            pointer_size,
            ..StackBuilder::default()
        }
    }

    pub fn string(&mut self, t: &mut Trace, s: &str) -> StrIdx {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = StrIdx(t.strings.len() as u32);
        t.strings.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    fn module(&mut self, t: &mut Trace, path: &str, kind: ModuleKind) -> ModuleIdx {
        if let Some(&m) = self.module_by_path.get(path) {
            return m;
        }
        let name = self.string(t, file_name(path));
        let path_idx = self.string(t, path);
        let m = ModuleIdx(t.modules.len() as u32);
        t.modules.push(Module {
            name,
            path: path_idx,
            kind,
            build_id: None,
            symbol_error: Some(
                "no symbols: the trace names no PDB for this image (no KernelTraceControl ImageID events; WPR and xperf add them when they merge a trace)"
                    .to_string(),
            ),
        });
        self.module_by_path.insert(path.to_string(), m);
        m
    }

    /// Records an image load (or rundown) of `path` at `base..base+size` in
    /// process `pid`.
    pub fn load_image(&mut self, t: &mut Trace, pid: u32, base: u64, size: u64, path: &str) {
        let kernel = pid == 0 || is_kernel_address(base, self.pointer_size);
        let kind = match (kernel, file_name(path).to_ascii_lowercase().as_str()) {
            (true, "ntoskrnl.exe" | "ntkrnlmp.exe" | "ntkrnlpa.exe" | "ntkrpamp.exe") => {
                ModuleKind::Kernel
            }
            (true, _) => ModuleKind::KernelModule,
            (false, _) => ModuleKind::User,
        };
        let module = self.module(t, path, kind);
        let image = Image {
            base,
            end: base.saturating_add(size.max(1)),
            module,
        };
        if kernel {
            insert_sorted(&mut self.kernel, image);
        } else {
            insert_sorted(self.images.entry(pid).or_default(), image);
        }
    }

    /// The module of the image loaded at exactly `base` in process `pid`
    /// (or in the kernel's space), if any.
    pub fn module_loaded_at(&self, pid: u32, base: u64) -> Option<ModuleIdx> {
        let images = if pid == 0 || is_kernel_address(base, self.pointer_size) {
            &self.kernel
        } else {
            self.images.get(&pid)?
        };
        find(images, base)
            .filter(|i| i.base == base)
            .map(|i| i.module)
    }

    /// The frame of a code address in process `pid`.
    pub fn frame(&mut self, t: &mut Trace, pid: u32, addr: u64) -> FrameIdx {
        let kernel = is_kernel_address(addr, self.pointer_size);
        let image = if kernel {
            find(&self.kernel, addr)
        } else {
            self.images.get(&pid).and_then(|i| find(i, addr))
        };
        let (module, offset) = match image {
            Some(i) => (i.module, addr - i.base),
            None => {
                let m = match self.unknown_module {
                    Some(m) => m,
                    None => {
                        let m = self.module(t, "[unknown]", ModuleKind::Other);
                        self.unknown_module = Some(m);
                        m
                    }
                };
                (m, addr)
            }
        };
        if let Some(&f) = self.frames.get(&(module, offset)) {
            return f;
        }
        if image.is_none() {
            self.unmapped += 1;
        }
        let name = match image {
            Some(_) => format!("{}+{offset:#x}", t.str(t.modules[module.ix()].name)),
            None => format!("{addr:#x}"),
        };
        let name = self.string(t, &name);
        let function = FuncIdx(t.functions.len() as u32);
        t.functions.push(Function {
            name,
            module,
            kernel,
        });
        let frame = FrameIdx(t.frames.len() as u32);
        t.frames.push(slowlab_model::trace::Frame {
            module,
            address: offset,
            function,
            kernel,
        });
        self.frames.insert((module, offset), frame);
        frame
    }

    /// Interns a stack of addresses, innermost first, in process `pid`.
    pub fn stack(&mut self, t: &mut Trace, pid: u32, addrs: &[u64]) -> Option<StackIdx> {
        let mut parent: Option<StackIdx> = None;
        for &addr in addrs.iter().rev() {
            let frame = self.frame(t, pid, addr);
            parent = Some(match self.nodes.get(&(parent, frame)) {
                Some(&s) => s,
                None => {
                    let s = StackIdx(t.stacks.len() as u32);
                    t.stacks.push(StackNode::new(parent, frame));
                    self.nodes.insert((parent, frame), s);
                    s
                }
            });
        }
        parent
    }
}

/// The stacks of a trace's events, keyed by (event timestamp, thread id):
/// kernel-mode frames first, then user-mode frames, innermost first.
#[derive(Default)]
pub struct StackIndex {
    parts: HashMap<(i64, u32), Vec<u64>>,
    pub stack_events: u64,
}

impl StackIndex {
    /// Adds frames walked for the event at `time` of `tid`; user-mode
    /// frames go after (outside of) kernel-mode ones.
    pub fn add(&mut self, time: i64, tid: u32, frames: &[u64], pointer_size: u8) {
        self.stack_events += 1;
        let entry = self.parts.entry((time, tid)).or_default();
        let user = frames
            .first()
            .is_some_and(|&a| !is_kernel_address(a, pointer_size));
        if user || entry.is_empty() {
            entry.extend_from_slice(frames);
        } else {
            let mut v = frames.to_vec();
            v.append(entry);
            *entry = v;
        }
    }

    /// The frames of the event at `time` of `tid`, if any were recorded.
    pub fn get(&self, time: i64, tid: u32) -> Option<&[u64]> {
        self.parts.get(&(time, tid)).map(Vec::as_slice)
    }
}
