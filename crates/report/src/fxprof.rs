//! The Firefox Profiler export (`--fxprof FILE.json[.gz]`): a *processed
//! profile* built with the `fxprof-processed-profile` crate (as samply
//! writes them), which profiler.firefox.com and Perfetto's UI open.
//!
//! What goes in: one process per traced process and one thread per traced
//! thread (those the selection keeps), each with its CPU samples and their
//! symbolized stacks (every module is a library with a symbol table made of
//! the trace's resolved frames, and the profile says it is symbolicated, so
//! the profiler asks no symbol server); each blocked stretch of a thread as
//! an interval marker carrying its kind, its task state and the thread that
//! ended it, with the blocking stack; and each finding as a marker on the
//! culprit's main thread. Times are relative to the trace's start, which is
//! dated by the wall clock perf recorded (or the Unix epoch without one).
//!
//! It does not compute anything: samples, states and findings come from
//! `slowlab_analyze`. The bytes are returned; the caller writes them.

use std::io::Write;
use std::sync::Arc;

use fxprof_processed_profile::debugid::DebugId;
use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CategoryPairHandle, CpuDelta, Frame, FrameFlags, FrameInfo,
    LibraryHandle, LibraryInfo, MarkerFieldFlags, MarkerFieldFormat, MarkerTiming, ProcessHandle,
    Profile, ReferenceTimestamp, SamplingInterval, StackHandle, StaticSchemaMarker,
    StaticSchemaMarkerField, StringHandle, Symbol, SymbolTable, ThreadHandle, Timestamp,
};
use rustc_hash::FxHashMap;
use slowlab_model::findings::Finding;
use slowlab_model::trace::{ModuleIdx, ModuleKind, ProcIdx, StackIdx, ThreadIdx, Trace};
use slowlab_model::views::blocked::BlockedStretch;

use crate::ReportError;

/// Blocked stretches shorter than this should get no marker: a busy trace
/// has millions of sub-10 µs waits, which would swamp the marker chart
/// without adding anything a reader would look at. (The caller picks the
/// stretches: `ThreadStates::blocked_stretches` takes these two limits.)
pub const MIN_BLOCKED_MARKER_NS: u64 = 10_000;

/// At most this many blocked markers (the longest), so that the profile of
/// a long system-wide trace still opens quickly.
pub const MAX_BLOCKED_MARKERS: usize = 200_000;

/// What the profile holds beyond the samples.
pub struct FxprofInput<'a> {
    pub trace: &'a Trace,
    /// For every thread of the trace, whether the profile shows it.
    pub threads: &'a [bool],
    /// The time range shown, absolute nanoseconds `[from, to)`.
    pub range_ns: (u64, u64),
    /// The blocked stretches to mark (see [`MIN_BLOCKED_MARKER_NS`]).
    pub blocked: &'a [BlockedStretch],
    pub findings: &'a [Finding],
}

/// The processed profile as JSON, gzipped when `gzip` is true.
pub fn fxprof_bytes(input: &FxprofInput<'_>, gzip: bool) -> Result<Vec<u8>, ReportError> {
    let profile = build_profile(input);
    let json = serde_json::to_vec(&profile).map_err(|e| ReportError::Serialize {
        what: "the Firefox Profiler profile".into(),
        message: e.to_string(),
    })?;
    if !gzip {
        return Ok(json);
    }
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing into memory cannot fail.
    enc.write_all(&json)
        .and_then(|()| enc.finish())
        .map_err(|e| ReportError::Serialize {
            what: "the gzipped profile".into(),
            message: e.to_string(),
        })
}

/// Whether a path asks for a gzipped profile (`.gz`).
pub fn wants_gzip(path: &std::path::Path) -> bool {
    path.extension().is_some_and(|e| e == "gz")
}

/// Builds the profile (see the module doc for what it holds).
pub fn build_profile(input: &FxprofInput<'_>) -> Profile {
    let trace = input.trace;
    let reference = match trace.meta.unix_ns(trace.meta.start_ns) {
        Some(ns) => ReferenceTimestamp::from_millis_since_unix_epoch(ns as f64 / 1e6),
        None => ReferenceTimestamp::from_millis_since_unix_epoch(0.0),
    };
    let interval = match trace.meta.sample_freq.filter(|&f| f > 0) {
        Some(hz) => SamplingInterval::from_nanos(1_000_000_000 / hz),
        None => SamplingInterval::from_millis(1),
    };
    let mut b = Builder {
        trace,
        profile: Profile::new("slowlab", reference, interval),
        libs: vec![None; trace.modules.len()],
        threads: FxHashMap::default(),
        processes: FxHashMap::default(),
        stacks: FxHashMap::default(),
        user: CategoryHandle::OTHER.into(),
        kernel: CategoryHandle::OTHER.into(),
    };
    b.profile.set_symbolicated(true);
    if let Some(release) = &trace.meta.os_release {
        b.profile.set_os_name(&format!("Linux {release}"));
    }
    b.user = b.profile.add_category("User", CategoryColor::Yellow).into();
    b.kernel = b
        .profile
        .add_category("Kernel", CategoryColor::Orange)
        .into();
    let blocked = b.profile.add_category("Blocked", CategoryColor::Blue);
    let finding_category = b.profile.add_category("Finding", CategoryColor::Red);

    let mask = input.threads;
    let (from, to) = input.range_ns;
    let s = &trace.samples;
    for i in 0..s.len() {
        let (th, t) = (s.thread[i], s.time_ns[i]);
        if !mask.get(th.ix()).copied().unwrap_or(false) || t < from || t >= to {
            continue;
        }
        let thread = b.thread(th);
        let stack = b.stack(thread, s.stack[i]);
        let at = b.time(t);
        b.profile
            .add_sample(thread, at, stack, CpuDelta::from_nanos(s.period[i]), 1);
    }
    b.blocked_markers(input.blocked, blocked);
    b.finding_markers(input.findings, mask, finding_category);
    b.profile
}

struct Builder<'t> {
    trace: &'t Trace,
    profile: Profile,
    /// Per module, its library once a frame of it was used.
    /// Per module: its library and base, once made.
    libs: Vec<Option<(LibraryHandle, u64)>>,
    threads: FxHashMap<ThreadIdx, ThreadHandle>,
    processes: FxHashMap<ProcIdx, ProcessHandle>,
    /// The profile's stack for a trace stack, per thread (handles are per
    /// thread in the profile).
    stacks: FxHashMap<(ThreadHandle, StackIdx), StackHandle>,
    user: CategoryPairHandle,
    kernel: CategoryPairHandle,
}

impl Builder<'_> {
    fn time(&self, t_ns: u64) -> Timestamp {
        Timestamp::from_nanos_since_reference(t_ns.saturating_sub(self.trace.meta.start_ns))
    }

    /// The profile thread of a trace thread, added (with its process) on
    /// first use.
    fn thread(&mut self, th: ThreadIdx) -> ThreadHandle {
        if let Some(&h) = self.threads.get(&th) {
            return h;
        }
        let trace = self.trace;
        let t = &trace.threads[th.ix()];
        let p = &trace.processes[t.process.ix()];
        let process = self.process(t.process);
        let start = self.time(t.start_ns.unwrap_or(trace.meta.start_ns));
        let is_main = t.tid == p.pid;
        let h = self
            .profile
            .add_thread(process, t.tid as u32, start, is_main);
        self.profile.set_thread_name(h, trace.str(t.comm));
        if let Some(end) = t.end_ns {
            let end = self.time(end);
            self.profile.set_thread_end_time(h, end);
        }
        self.threads.insert(th, h);
        h
    }

    /// The profile process of a trace process row, added on first use.
    fn process(&mut self, proc_: ProcIdx) -> ProcessHandle {
        if let Some(&h) = self.processes.get(&proc_) {
            return h;
        }
        let trace = self.trace;
        let p = &trace.processes[proc_.ix()];
        let start = self.time(p.start_ns.unwrap_or(trace.meta.start_ns));
        let h = self
            .profile
            .add_process(trace.str(p.comm), p.pid as u32, start);
        if let Some(end) = p.end_ns {
            let end = self.time(end);
            self.profile.set_process_end_time(h, end);
        }
        self.processes.insert(proc_, h);
        h
    }

    /// The profile stack of a trace stack on `thread`, interned root first.
    fn stack(&mut self, thread: ThreadHandle, stack: Option<StackIdx>) -> Option<StackHandle> {
        let stack = stack?;
        if let Some(&h) = self.stacks.get(&(thread, stack)) {
            return Some(h);
        }
        let node = self.trace.stacks[stack.ix()];
        let parent = match node.parent() {
            Some(p) => self.stack(thread, Some(p)),
            None => None,
        };
        let frame = self.frame_info(node.frame);
        let frame = self.profile.intern_frame(thread, frame);
        let h = self.profile.intern_stack(thread, parent, frame);
        self.stacks.insert((thread, stack), h);
        Some(h)
    }

    fn frame_info(&mut self, frame: slowlab_model::trace::FrameIdx) -> FrameInfo {
        let f = &self.trace.frames[frame.ix()];
        let category_pair = if f.kernel { self.kernel } else { self.user };
        let lib = self.lib(f.module);
        let frame = match lib {
            Some((lib, base)) if f.address >= base && f.address - base <= u32::MAX as u64 => {
                Frame::RelativeAddressFromInstructionPointer(lib, (f.address - base) as u32)
            }
            _ => {
                let name = self.trace.str(self.trace.functions[f.function.ix()].name);
                Frame::Label(self.profile.intern_string(name))
            }
        };
        FrameInfo {
            frame,
            category_pair,
            flags: FrameFlags::empty(),
        }
    }

    /// The library of a module with its base address (frames are relative
    /// to it), made on first use with a symbol table of every resolved
    /// frame of the module: exact addresses, so each frame finds its name.
    fn lib(&mut self, module: ModuleIdx) -> Option<(LibraryHandle, u64)> {
        if let Some(known) = self.libs[module.ix()] {
            return Some(known);
        }
        let trace = self.trace;
        let m = &trace.modules[module.ix()];
        if m.kind == ModuleKind::Other {
            return None;
        }
        // Once per module: the base and the symbol table scan every frame.
        let base = match m.kind {
            // User frames are file offsets already; kernel frames are
            // absolute addresses, made relative to the lowest one.
            ModuleKind::User => 0,
            _ => trace
                .frames
                .iter()
                .filter(|f| f.module == module)
                .map(|f| f.address)
                .min()?,
        };
        let symbols = trace
            .frames
            .iter()
            .filter(|f| f.module == module && f.address >= base)
            .filter(|f| f.address - base <= u32::MAX as u64)
            .filter_map(|f| {
                let name = trace.str(trace.functions[f.function.ix()].name);
                (name != "[unknown]").then(|| Symbol {
                    address: (f.address - base) as u32,
                    size: Some(1),
                    name: name.to_owned(),
                })
            })
            .collect();
        let path = trace.str(m.path).to_owned();
        let name = trace.str(m.name).to_owned();
        let h = self.profile.add_lib(LibraryInfo {
            debug_name: name.clone(),
            name,
            debug_path: path.clone(),
            path,
            debug_id: DebugId::nil(),
            code_id: m.build_id.clone(),
            arch: trace.meta.arch.clone(),
            symbol_table: Some(Arc::new(SymbolTable::new(symbols))),
        });
        self.libs[module.ix()] = Some((h, base));
        Some((h, base))
    }

    /// One interval marker per blocked stretch.
    fn blocked_markers(&mut self, stretches: &[BlockedStretch], category: CategoryHandle) {
        let trace = self.trace;
        for b in stretches {
            let thread = self.thread(b.thread);
            let waker = match (b.woken, b.waker) {
                (true, Some(w)) => {
                    let w = &trace.threads[w.ix()];
                    format!("{} ({})", trace.str(w.comm), w.tid)
                }
                (true, None) => "an interrupt on an idle CPU".to_owned(),
                (false, _) => "not recorded".to_owned(),
            };
            let marker = BlockedMarker {
                kind: self.profile.intern_string(b.kind.as_str()),
                state: self.profile.intern_string(task_state_name(b.task_state)),
                waker: self.profile.intern_string(&waker),
                category,
            };
            let timing = MarkerTiming::Interval(self.time(b.start_ns), self.time(b.end_ns));
            let handle = self.profile.add_marker(thread, timing, marker);
            let stack = self.stack(thread, b.stack);
            self.profile.set_marker_stack(thread, handle, stack);
        }
    }

    /// Each finding as an interval over the whole trace on the culprit's
    /// main thread (or the first selected thread when it names none).
    fn finding_markers(&mut self, findings: &[Finding], mask: &[bool], category: CategoryHandle) {
        let trace = self.trace;
        let first_selected = mask.iter().position(|&m| m).map(|i| ThreadIdx(i as u32));
        for f in findings {
            let culprit = f.culprit.pid.and_then(|pid| {
                trace
                    .threads
                    .iter()
                    .position(|t| t.tid == pid)
                    .map(|i| ThreadIdx(i as u32))
            });
            let Some(th) = culprit.or(first_selected) else {
                continue;
            };
            let thread = self.thread(th);
            let marker = FindingMarker {
                title: self.profile.intern_string(&f.title),
                id: self.profile.intern_string(&f.id),
                severity: self.profile.intern_string(f.severity.as_str()),
                fix: self.profile.intern_string(&f.fix),
                cost_ms: f.cost_s * 1e3,
                category,
            };
            let timing = MarkerTiming::Interval(
                self.time(trace.meta.start_ns),
                self.time(trace.meta.end_ns),
            );
            self.profile.add_marker(thread, timing, marker);
        }
    }
}

/// The kernel's letter for a task state, as `ps` shows it.
fn task_state_name(state: u64) -> &'static str {
    match state & 0xff {
        0x01 => "S (interruptible sleep)",
        0x02 => "D (uninterruptible sleep)",
        0x04 | 0x08 => "T (stopped)",
        0x80 => "I (idle)",
        _ => "other",
    }
}

/// A blocked stretch of a thread.
struct BlockedMarker {
    kind: StringHandle,
    state: StringHandle,
    waker: StringHandle,
    category: CategoryHandle,
}

impl StaticSchemaMarker for BlockedMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "SlowlabBlocked";
    const DESCRIPTION: Option<&'static str> =
        Some("The thread was off the CPU, waiting; the waker is the thread that ended the wait.");
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.kind}");
    const TOOLTIP_LABEL: Option<&'static str> =
        Some("blocked ({marker.data.kind}), woken by {marker.data.waker}");
    const TABLE_LABEL: Option<&'static str> =
        Some("{marker.data.kind} wait, woken by {marker.data.waker}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "kind",
            label: "Kind",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "state",
            label: "Task state",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::empty(),
        },
        StaticSchemaMarkerField {
            key: "waker",
            label: "Woken by",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
    ];

    fn name(&self, profile: &mut Profile) -> StringHandle {
        profile.intern_string("Blocked")
    }

    fn category(&self, _profile: &mut Profile) -> CategoryHandle {
        self.category
    }

    fn string_field_value(&self, field_index: u32) -> StringHandle {
        match field_index {
            0 => self.kind,
            1 => self.state,
            _ => self.waker,
        }
    }

    fn number_field_value(&self, _field_index: u32) -> f64 {
        0.0
    }
}

/// A detector's finding.
struct FindingMarker {
    title: StringHandle,
    id: StringHandle,
    severity: StringHandle,
    fix: StringHandle,
    cost_ms: f64,
    category: CategoryHandle,
}

impl StaticSchemaMarker for FindingMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "SlowlabFinding";
    const DESCRIPTION: Option<&'static str> = Some("What slowlab's detectors concluded.");
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.title}");
    const TOOLTIP_LABEL: Option<&'static str> = Some("{marker.data.title}");
    const TABLE_LABEL: Option<&'static str> =
        Some("{marker.data.severity}: {marker.data.title} ({marker.data.cost})");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "title",
            label: "Finding",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "id",
            label: "Detector",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "severity",
            label: "Severity",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::empty(),
        },
        StaticSchemaMarkerField {
            key: "fix",
            label: "Fix",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::empty(),
        },
        StaticSchemaMarkerField {
            key: "cost",
            label: "Cost",
            format: MarkerFieldFormat::Milliseconds,
            flags: MarkerFieldFlags::empty(),
        },
    ];

    fn name(&self, profile: &mut Profile) -> StringHandle {
        profile.intern_string("Finding")
    }

    fn category(&self, _profile: &mut Profile) -> CategoryHandle {
        self.category
    }

    fn string_field_value(&self, field_index: u32) -> StringHandle {
        match field_index {
            0 => self.title,
            1 => self.id,
            2 => self.severity,
            _ => self.fix,
        }
    }

    fn number_field_value(&self, _field_index: u32) -> f64 {
        self.cost_ms
    }
}
