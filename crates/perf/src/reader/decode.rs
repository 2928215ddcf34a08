//! One record into the model. Samples, decoded in place by
//! [`records::parse_sample`], become CPU samples (handed to `stacks` in
//! batches) or events with their stacks, their tracepoint fields read at
//! the offsets `attrs` found; the rare bookkeeping records (mmap, comm,
//! fork, exit, lost) are decoded by `linux-perf-event-reader` and handed to
//! `procs`.
//!
//! It does not walk the file (`driver` and `crate::records` do) nor intern
//! stacks.

use linux_perf_data::linux_perf_event_reader::{
    CpuMode, EventRecord, RawData, RawEventRecord, RecordType,
};
use slowlab_model::trace::{Event, EventKind};

use super::attrs::{AttrKind, Ctx};
use super::stacks::Pending;
use super::Builder;
use crate::guard;
use crate::records::{self, rtype, Record};
use crate::tracepoint::Field;

/// `PERF_RECORD_MISC_MMAP_BUILD_ID`: an MMAP2 record carries a build id
/// (length, padding, 20 bytes) in place of the device and inode.
const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
/// Offset of that build id's length in an MMAP2 body (after pid, tid,
/// address, length and page offset).
const MMAP2_BUILD_ID_LEN_AT: usize = 32;

/// Whether `linux-perf-event-reader` 0.10 would panic on this record
/// rather than return an error: an MMAP2 whose build id claims more than
/// 20 bytes (an `assert!`; reported upstream, see `fuzz/README.md`). The
/// perf crate's guard would catch it, but fuzzing treats every caught
/// panic as a bug, so such records are skipped before they get there.
fn upstream_would_panic(rec: Record<'_>) -> bool {
    rec.ty == rtype::MMAP2
        && rec.misc & MISC_MMAP_BUILD_ID != 0
        && rec
            .body
            .get(MMAP2_BUILD_ID_LEN_AT)
            .is_some_and(|&len| len > 20)
}

/// `PERF_RECORD_MISC_CPUMODE_MASK` and `PERF_RECORD_MISC_KERNEL`.
const MISC_CPUMODE_MASK: u16 = 7;
const MISC_KERNEL: u16 = 1;

impl Builder {
    /// Turns one record into the model.
    pub(super) fn on_record(&mut self, ctx: &Ctx, attr: usize, rec: Record<'_>) {
        // Queued stacks need no flushing before bookkeeping changes maps:
        // their frame keys were taken when they were queued.
        match rec.ty {
            rtype::SAMPLE => self.on_sample(ctx, attr, rec),
            // A count, whatever the order: `records::order_free`, so a
            // stream may hand these over out of time order.
            rtype::LOST_SAMPLES => {
                self.t.stats.lost_events = self
                    .t
                    .stats
                    .lost_events
                    .saturating_add(ctx.e.u64(rec.body, 0).unwrap_or(0));
            }
            rtype::MMAP | rtype::MMAP2 | rtype::COMM | rtype::FORK | rtype::EXIT | rtype::LOST => {
                self.on_rare(ctx, attr, rec)
            }
            _ => {}
        }
    }

    /// Records that are few (process and mapping bookkeeping), decoded by
    /// `linux-perf-event-reader`.
    fn on_rare(&mut self, ctx: &Ctx, attr: usize, rec: Record<'_>) {
        if upstream_would_panic(rec) {
            self.t.stats.unparsed_records += 1;
            return;
        }
        let Some(&info) = ctx.parse_infos.get(attr) else {
            self.t.stats.unparsed_records += 1;
            return;
        };
        let raw = RawEventRecord::new(
            RecordType(rec.ty),
            rec.misc,
            RawData::Single(rec.body),
            info,
        );
        let time = ctx
            .attrs
            .layout(attr)
            .and_then(|l| l.time(ctx.e, rec.ty, rec.body))
            .unwrap_or(0);
        let parsed = match guard(|| raw.parse()) {
            Some(Ok(p)) => p,
            _ => {
                self.t.stats.unparsed_records += 1;
                return;
            }
        };
        match parsed {
            EventRecord::Comm(c) => {
                let name = String::from_utf8_lossy(&c.name.as_slice()).into_owned();
                self.on_comm(c.pid, c.tid, &name, c.is_execve, time);
            }
            EventRecord::Fork(f) => self.on_fork(f.pid, f.ppid, f.tid, f.ptid, f.timestamp),
            EventRecord::Exit(f) => self.on_exit(f.pid, f.tid, f.timestamp),
            EventRecord::Mmap(m) if m.is_executable => {
                let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                let kernel = matches!(m.cpu_mode, CpuMode::Kernel);
                self.on_mmap(m.pid, m.address, m.length, m.page_offset, &path, kernel);
            }
            EventRecord::Mmap2(m) if m.protection & PROT_EXEC != 0 => {
                let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                let kernel = matches!(m.cpu_mode, CpuMode::Kernel);
                self.on_mmap(m.pid, m.address, m.length, m.page_offset, &path, kernel);
            }
            // A damaged count must not overflow (fuzzing found it).
            EventRecord::Lost(l) => {
                self.t.stats.lost_events = self.t.stats.lost_events.saturating_add(l.count)
            }
            _ => {}
        }
    }

    /// A sample: a CPU sample, or a tracepoint or software event with the
    /// stack where it happened. Decoded in place by [`records::parse_sample`].
    fn on_sample(&mut self, ctx: &Ctx, attr: usize, rec: Record<'_>) {
        let (Some(layout), Some(kind)) = (ctx.attrs.layout(attr), ctx.kinds.get(attr)) else {
            self.t.stats.unparsed_records += 1;
            return;
        };
        let Some(s) = records::parse_sample(ctx.e, layout, rec.body) else {
            self.t.stats.unparsed_records += 1;
            return;
        };
        let time = s.time.unwrap_or(0);
        self.see_time(time);
        let pid = s.pid.unwrap_or(-1);
        let tid = s.tid.unwrap_or(pid);
        let thread = self.thread(pid, tid);
        let cpu = s.cpu.unwrap_or(0);
        let kernel = rec.misc & MISC_CPUMODE_MASK == MISC_KERNEL;
        let p = Pending::sample(time, s.period.unwrap_or(1), thread, cpu);
        if let AttrKind::Cpu = kind {
            self.queue_stack(ctx.e, pid, s.callchain, s.ip, kernel, p);
            return;
        }
        let raw = s.raw.unwrap_or(&[]);
        let be = ctx.e.big;
        let get = |f: &Option<Field>| f.and_then(|f| f.read(raw, be));
        let kind = match kind {
            // Batched above.
            AttrKind::Cpu => return,
            AttrKind::Switch {
                prev_pid,
                prev_state,
                next_pid,
                next_prio,
            } => EventKind::Switch {
                prev_tid: get(prev_pid).map_or(-1, |v| v as i32),
                prev_state: get(prev_state).unwrap_or(0),
                next_tid: get(next_pid).map_or(-1, |v| v as i32),
                next_prio: get(next_prio).map_or(120, |v| v as i32),
                windows: None,
            },
            AttrKind::Waking { pid, target_cpu } => EventKind::Waking {
                tid: get(pid).map_or(-1, |v| v as i32),
                target_cpu: get(target_cpu).map_or(-1, |v| v as i32),
            },
            AttrKind::PageFault {
                user,
                address,
                ip,
                error_code,
            } => EventKind::PageFault {
                address: get(address).unwrap_or(0),
                ip: get(ip).unwrap_or(0),
                error_code: get(error_code).unwrap_or(0) as u32,
                user: *user,
                windows_kind: None,
            },
            AttrKind::MajorFault => EventKind::MajorFault { address: s.addr },
            AttrKind::Block {
                complete,
                dev,
                sector,
                nr_sector,
                rwbs,
            } => EventKind::BlockRequest {
                dev: get(dev).unwrap_or(0) as u32,
                sector: get(sector).unwrap_or(0),
                bytes: get(nr_sector).unwrap_or(0).saturating_mul(512),
                write: rwbs.is_some_and(|f| {
                    raw.get(f.offset..f.offset.saturating_add(f.size))
                        .is_some_and(|b| b.contains(&b'W'))
                }),
                complete: *complete,
            },
            AttrKind::SysEnter(name) => {
                let mut args = [0u64; 6];
                for (i, a) in args.iter_mut().enumerate() {
                    *a = ctx.e.u64(raw, 16 + 8 * i).unwrap_or(0);
                }
                EventKind::SyscallEnter {
                    name: *name,
                    args: Box::new(args),
                    file_op: None,
                }
            }
            AttrKind::SysExit(name) => EventKind::SyscallExit {
                name: *name,
                ret: ctx.e.u64(raw, 16).unwrap_or(0) as i64,
                file_op: None,
            },
            AttrKind::Other(name) => EventKind::Other { name: *name },
        };
        // An event's stack is interned in its place among the samples and
        // given to it at the end (`finish_interning`): one per event.
        let p = Pending { event: true, ..p };
        self.queue_stack(ctx.e, pid, s.callchain, s.ip, kernel, p);
        self.t.events.push(Event {
            time_ns: time,
            cpu,
            thread,
            stack: None,
            kind,
        });
    }
}

/// `PROT_EXEC` on every Linux architecture.
const PROT_EXEC: u32 = 4;
