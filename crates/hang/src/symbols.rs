//! User stacks of threads that slowlab may not stop: return addresses found
//! by scanning the stack upward from the stack pointer that
//! `/proc/PID/task/TID/syscall` gives, each kept only when it points into
//! an executable file mapping right after a call instruction, and named
//! from the file's ELF symbol tables (`.symtab`, else `.dynsym`).
//!
//! Best effort by design: without stopping the thread there is no frame
//! pointer register to start a frame-pointer walk from, so a stale return
//! address left in an unused stack slot can appear between real frames.
//! Functions that only have local symbols in a stripped library (glibc's
//! `__lll_lock_wait`) show as `module+0xOFFSET`. No DWARF, no demangling.

use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;

use object::{Object, ObjectSegment, ObjectSymbol};

use crate::procfs::{parse_maps, Mapping, Proc};

/// Bytes of stack read above the stack pointer.
pub const SCAN_BYTES: u64 = 8 * 1024;
/// Frames kept.
pub const MAX_FRAMES: usize = 24;

/// A return address and its name.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    pub addr: u64,
    pub function: Option<String>,
    /// The file's name (`libc.so.6`), empty for anonymous code.
    pub module: String,
    pub offset: u64,
}

impl Frame {
    /// `function+0xOFF (module)`, or `0xOFF (module)` (the offset in the
    /// file) when no symbol covers it.
    pub fn text(&self) -> String {
        match &self.function {
            Some(f) => format!("{f}+{:#x} ({})", self.offset, self.module),
            None if self.module.is_empty() => format!("{:#x}", self.addr),
            None => format!("{:#x} ({})", self.offset, self.module),
        }
    }

    /// Is this frame in the C library or the dynamic loader (not the
    /// program's own code)?
    pub fn in_libc(&self) -> bool {
        [
            "libc.so",
            "libc-",
            "libpthread",
            "ld-linux",
            "ld-musl",
            "libc.musl",
        ]
        .iter()
        .any(|p| self.module.starts_with(p))
    }
}

/// An ELF file's symbols (file virtual addresses) and loadable segments,
/// with its bytes for checking call instructions.
struct ElfFile {
    /// (start, size, name), sorted by start.
    symbols: Vec<(u64, u64, String)>,
    /// (file offset, file size, virtual address) of each PT_LOAD.
    segments: Vec<(u64, u64, u64)>,
    data: Vec<u8>,
}

impl ElfFile {
    fn parse(data: Vec<u8>) -> Option<ElfFile> {
        let obj = object::File::parse(&*data).ok()?;
        let mut symbols: Vec<(u64, u64, String)> = obj
            .symbols()
            .chain(obj.dynamic_symbols())
            .filter(|s| s.kind() == object::SymbolKind::Text && s.address() != 0)
            .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_string())))
            .collect();
        symbols.sort();
        symbols.dedup_by_key(|s| s.0);
        let segments = obj
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        drop(obj);
        Some(ElfFile {
            symbols,
            segments,
            data,
        })
    }

    /// File offset → virtual address.
    fn vaddr(&self, off: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(o, size, _)| off >= *o && off < o + size)
            .map(|(o, _, v)| v + (off - o))
    }

    /// The function containing `vaddr` and the offset into it.
    fn function(&self, vaddr: u64) -> Option<(&str, u64)> {
        let i = self.symbols.partition_point(|s| s.0 <= vaddr);
        let (start, size, name) = self.symbols.get(i.checked_sub(1)?)?;
        (*size == 0 || vaddr < start + size).then(|| (name.as_str(), vaddr - start))
    }

    /// Do the bytes before file offset `off` end with a call instruction?
    /// `call rel32` (E8 + 4 bytes), or `call r/m64` (FF /2) in its 2, 3,
    /// 4, 6 and 7 byte forms.
    fn follows_call(&self, off: u64) -> bool {
        let off = off as usize;
        let byte = |back: usize| {
            off.checked_sub(back)
                .and_then(|i| self.data.get(i).copied())
        };
        if byte(5) == Some(0xe8) {
            return true;
        }
        [2usize, 3, 4, 6, 7].iter().any(|&n| {
            byte(n) == Some(0xff) && byte(n - 1).is_some_and(|modrm| (modrm >> 3) & 7 == 2)
        })
    }
}

/// Symbolizes user stacks, caching each process's mappings and each
/// file's symbols.
#[derive(Default)]
pub struct Symbolizer {
    maps: HashMap<i32, Rc<Vec<Mapping>>>,
    /// By process and mapping start.
    files: HashMap<(i32, u64), Option<Rc<ElfFile>>>,
}

impl Symbolizer {
    fn maps(&mut self, proc: &Proc, pid: i32) -> Rc<Vec<Mapping>> {
        self.maps
            .entry(pid)
            .or_insert_with(|| {
                let text = proc
                    .read(&proc.pid_dir(pid).join("maps"))
                    .unwrap_or_default();
                Rc::new(parse_maps(&text))
            })
            .clone()
    }

    fn file(&mut self, proc: &Proc, pid: i32, m: &Mapping) -> Option<Rc<ElfFile>> {
        let key = (pid, m.start);
        if let Some(f) = self.files.get(&key) {
            return f.clone();
        }
        // map_files reaches the mapped file even in another mount
        // namespace or after it was deleted; root's view of the path else.
        let via_map = proc
            .pid_dir(pid)
            .join("map_files")
            .join(format!("{:x}-{:x}", m.start, m.end));
        let via_root: PathBuf = proc
            .pid_dir(pid)
            .join("root")
            .join(m.path.trim_start_matches('/'));
        let data = std::fs::read(via_map)
            .or_else(|_| std::fs::read(via_root))
            .ok();
        let file = data.and_then(ElfFile::parse).map(Rc::new);
        self.files.insert(key, file.clone());
        file
    }

    /// Names one address of a process.
    pub fn frame(&mut self, proc: &Proc, pid: i32, addr: u64) -> Option<Frame> {
        self.frame_checked(proc, pid, addr, false)
    }

    fn frame_checked(
        &mut self,
        proc: &Proc,
        pid: i32,
        addr: u64,
        must_follow_call: bool,
    ) -> Option<Frame> {
        let maps = self.maps(proc, pid);
        let i = maps.partition_point(|m| m.start <= addr);
        let m = maps.get(i.checked_sub(1)?)?;
        if addr >= m.end || !m.executable {
            return None;
        }
        let module = m
            .path
            .trim_end_matches(" (deleted)")
            .rsplit('/')
            .next()
            .unwrap_or("")
            .to_string();
        if m.path.is_empty() || m.path.starts_with('[') {
            // Anonymous or [vdso] code: no file to check a call in.
            return (!must_follow_call).then_some(Frame {
                addr,
                function: None,
                module,
                offset: addr - m.start,
            });
        }
        let off = addr - m.start + m.offset;
        let file = self.file(proc, pid, m);
        let Some(file) = file else {
            return (!must_follow_call).then_some(Frame {
                addr,
                function: None,
                module,
                offset: off,
            });
        };
        if must_follow_call && !file.follows_call(off) {
            return None;
        }
        let vaddr = file.vaddr(off).unwrap_or(off);
        // A return address belongs to the call's function: look up the
        // byte before it (a call can be a function's last instruction).
        let lookup = if must_follow_call {
            vaddr.saturating_sub(1)
        } else {
            vaddr
        };
        Some(match file.function(lookup) {
            Some((name, into)) => Frame {
                addr,
                function: Some(name.to_string()),
                module,
                offset: into + (vaddr - lookup),
            },
            None => Frame {
                addr,
                function: None,
                module,
                offset: off,
            },
        })
    }

    /// The frames of a thread stopped in the kernel at `pc` with stack
    /// pointer `sp`: `pc` itself, then the return addresses found above
    /// `sp`.
    pub fn user_stack(&mut self, proc: &Proc, pid: i32, sp: u64, pc: u64) -> Vec<Frame> {
        let mut frames: Vec<Frame> = self.frame(proc, pid, pc).into_iter().collect();
        let maps = self.maps(proc, pid);
        let i = maps.partition_point(|m| m.start <= sp);
        let Some(stack) = i.checked_sub(1).and_then(|i| maps.get(i)) else {
            return frames;
        };
        let len = SCAN_BYTES.min(stack.end.saturating_sub(sp)) as usize;
        let mut buf = vec![0u8; len];
        if proc.read_mem(pid, sp, &mut buf).is_err() {
            return frames;
        }
        for word in buf.chunks_exact(8) {
            if frames.len() >= MAX_FRAMES {
                break;
            }
            let value = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
            if value < 0x1000 {
                continue;
            }
            if let Some(f) = self.frame_checked(proc, pid, value, true) {
                frames.push(f);
            }
        }
        frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_instructions_are_recognised() {
        let file = ElfFile {
            symbols: vec![],
            segments: vec![],
            //        call rel32 ─────────────┐ call *%rax ┐
            data: vec![0x90, 0xe8, 1, 2, 3, 4, 0x90, 0xff, 0xd0, 0x90],
        };
        assert!(file.follows_call(6));
        assert!(file.follows_call(9));
        assert!(!file.follows_call(8));
        assert!(!file.follows_call(1));
    }

    #[test]
    fn sized_symbols_do_not_swallow_what_follows_them() {
        let file = ElfFile {
            symbols: vec![(0x100, 0x10, "f".into()), (0x200, 0, "g".into())],
            segments: vec![(0, 0x1000, 0)],
            data: vec![],
        };
        assert_eq!(file.function(0x105), Some(("f", 5)));
        assert_eq!(file.function(0x150), None);
        assert_eq!(file.function(0x250), Some(("g", 0x50)));
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn this_threads_stack_names_this_function() {
        // The test thread's own stack pointer and a return address into
        // this test's caller: the scan must find the test harness.
        let proc = Proc::new(std::path::Path::new("/"));
        let mut sym = Symbolizer::default();
        let sp: u64;
        // SAFETY: reads the stack pointer register only.
        unsafe { std::arch::asm!("mov {}, rsp", out(reg) sp) };
        let frames = sym.user_stack(&proc, std::process::id() as i32, sp, 0);
        assert!(
            frames.iter().any(|f| f.function.is_some()),
            "no named frame in {frames:?}"
        );
    }
}
