//! What each event (attribute) of a file means for the model: CPU
//! samples; a scheduler, fault, block or syscall tracepoint; or an event
//! that is only counted. For tracepoints, where the fields the model reads
//! lie in the raw data, looked up once per attribute (from the file's
//! tracing data, else this machine's tracefs), not per record. Also names
//! the events of a file that lacks their names.
//!
//! It reads no records: `decode` turns them into the model with what is
//! found here.

use linux_perf_data::linux_perf_event_reader::{
    PerfEventType, RecordParseInfo, SamplingPolicy, SoftwareCounterType,
};
use linux_perf_data::{AttributeDescription, Endianness, Feature};
use slowlab_model::trace::StrIdx;

use super::Builder;
use crate::intern::FxMap;
use crate::records::{AttrOf, Endian, Layout};
use crate::tracepoint::{Field, Format};

/// How the records of one event (attribute) are turned into the model.
/// Tracepoint fields are looked up once here, not per record.
pub(super) enum AttrKind {
    Cpu,
    Switch {
        prev_pid: Option<Field>,
        prev_state: Option<Field>,
        next_pid: Option<Field>,
        next_prio: Option<Field>,
    },
    Waking {
        pid: Option<Field>,
        target_cpu: Option<Field>,
    },
    PageFault {
        user: bool,
        address: Option<Field>,
        ip: Option<Field>,
        error_code: Option<Field>,
    },
    MajorFault,
    Block {
        complete: bool,
        dev: Option<Field>,
        sector: Option<Field>,
        nr_sector: Option<Field>,
        rwbs: Option<Field>,
    },
    SysEnter(StrIdx),
    SysExit(StrIdx),
    Other(StrIdx),
}

/// What every record needs to be decoded: byte order, where each
/// attribute's fields lie, and what each attribute means.
pub(super) struct Ctx {
    pub(super) e: Endian,
    pub(super) attrs: AttrOf,
    pub(super) parse_infos: Vec<RecordParseInfo>,
    pub(super) kinds: Vec<AttrKind>,
}

/// What each attribute's records mean and where their fields lie.
/// `file`: the file's bytes (not a pipe's), where an attribute's event ids are read
/// when `linux-perf-data` has none for it ([`attr_section_ids`]).
pub(super) fn event_kinds(
    b: &mut Builder,
    perf_file: &linux_perf_data::PerfFile,
    file: Option<&[u8]>,
    e: Endian,
    endian: Endianness,
) -> Ctx {
    let tracing = perf_file
        .feature_section_data(Feature::TRACING_DATA)
        .map(<[u8]>::to_vec);
    let descs: &[AttributeDescription] = perf_file.event_attributes();
    let file_ids = match file {
        Some(data) if descs.len() > 1 && descs.iter().all(|d| d.event_ids.is_empty()) => {
            attr_section_ids(data, e).filter(|ids| ids.len() == descs.len())
        }
        _ => None,
    };
    let mut kinds = Vec::with_capacity(descs.len());
    let mut layouts = Vec::with_capacity(descs.len());
    let mut parse_infos = Vec::with_capacity(descs.len());
    let mut cpu_attr = None;
    for (i, d) in descs.iter().enumerate() {
        let a = &d.attr;
        let config = match a.type_ {
            PerfEventType::Tracepoint(id) => id,
            _ => 0,
        };
        let name = d
            .name
            .clone()
            .unwrap_or_else(|| fallback_name(a.type_, config));
        layouts.push((
            Layout::new(
                a.sample_format.bits(),
                a.read_format.bits(),
                a.flags
                    .contains(linux_perf_data::linux_perf_event_reader::AttrFlags::SAMPLE_ID_ALL),
            ),
            file_ids
                .as_ref()
                .map_or_else(|| d.event_ids.clone(), |ids| ids[i].clone()),
        ));
        parse_infos.push(RecordParseInfo::new(a, endian));
        let mut kind = classify_attr(b, &name, a.type_, tracing.as_deref());
        if matches!(kind, AttrKind::Cpu) {
            if cpu_attr.is_none() {
                cpu_attr = Some(i);
                // `cpu-clock/freq=1000/` (slowlab record's spelling) is `cpu-clock`.
                let event = name.split('/').next().unwrap_or(&name);
                b.t.meta.sample_event = Some(event.to_string());
                if let SamplingPolicy::Frequency(f) = a.sampling_policy {
                    b.t.meta.sample_freq = Some(f);
                }
            } else {
                // Only the first sampling event feeds the CPU samples.
                kind = AttrKind::Other(b.s(&name));
            }
        }
        kinds.push(kind);
        b.t.meta.events.push(name);
    }
    Ctx {
        e,
        attrs: AttrOf::new(layouts),
        parse_infos,
        kinds,
    }
}

fn classify_attr(
    b: &mut Builder,
    name: &str,
    ty: PerfEventType,
    tracing: Option<&[u8]>,
) -> AttrKind {
    let fmt = |tp: &str| -> Format {
        tracing
            .and_then(|blob| Format::find_in_tracing_data(blob, tp))
            .or_else(|| local_format(name))
            .unwrap_or_default()
    };
    match ty {
        PerfEventType::Tracepoint(_) => {
            let (_, tp) = name.split_once(':').unwrap_or(("", name));
            match tp {
                "sched_switch" => {
                    let f = fmt(tp);
                    AttrKind::Switch {
                        prev_pid: f.field("prev_pid"),
                        prev_state: f.field("prev_state"),
                        next_pid: f.field("next_pid"),
                        next_prio: f.field("next_prio"),
                    }
                }
                "sched_waking" | "sched_wakeup" => {
                    let f = fmt(tp);
                    AttrKind::Waking {
                        pid: f.field("pid"),
                        target_cpu: f.field("target_cpu"),
                    }
                }
                "block_rq_issue" | "block_rq_complete" => {
                    let f = fmt(tp);
                    AttrKind::Block {
                        complete: tp == "block_rq_complete",
                        dev: f.field("dev"),
                        sector: f.field("sector"),
                        nr_sector: f.field("nr_sector"),
                        rwbs: f.field("rwbs"),
                    }
                }
                "page_fault_user" | "page_fault_kernel" => {
                    let f = fmt(tp);
                    AttrKind::PageFault {
                        user: tp == "page_fault_user",
                        address: f.field("address"),
                        ip: f.field("ip"),
                        error_code: f.field("error_code"),
                    }
                }
                _ => {
                    if let Some(sc) = tp.strip_prefix("sys_enter_") {
                        AttrKind::SysEnter(b.s(sc))
                    } else if let Some(sc) = tp.strip_prefix("sys_exit_") {
                        AttrKind::SysExit(b.s(sc))
                    } else {
                        AttrKind::Other(b.s(name))
                    }
                }
            }
        }
        PerfEventType::Software(SoftwareCounterType::PageFaultsMaj) => AttrKind::MajorFault,
        PerfEventType::Software(
            SoftwareCounterType::PageFaults
            | SoftwareCounterType::PageFaultsMin
            | SoftwareCounterType::ContextSwitches
            | SoftwareCounterType::CpuMigrations,
        ) => AttrKind::Other(b.s(name)),
        _ => AttrKind::Cpu,
    }
}

/// Format of a tracepoint from this machine's tracefs, for files without
/// a tracing-data section.
fn local_format(name: &str) -> Option<Format> {
    let (sys, tp) = name.split_once(':')?;
    for root in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if let Ok(text) = std::fs::read_to_string(format!("{root}/events/{sys}/{tp}/format")) {
            return Some(Format::parse(&text));
        }
    }
    None
}

/// Each attribute's event ids, from the attribute section: each entry is `struct
/// perf_file_attr`, the attribute then the file section of its ids (u64s), so the ids
/// sit in the entry's last 16 bytes. `linux-perf-data` takes ids only from the
/// EVENT_DESC feature, which a file cut short or killed before its end lacks; without
/// them every record of a file of several events would count as the first event's.
/// `None` when an entry or a list lies outside the file, or the lists together claim
/// more than the file holds (real ones do not overlap).
pub(super) fn attr_section_ids(data: &[u8], e: Endian) -> Option<Vec<Vec<u64>>> {
    let attr_size = e.u64(data, 16)?;
    let (attrs_off, attrs_size) = (e.u64(data, 24)?, e.u64(data, 32)?);
    if attr_size < 16 {
        return None;
    }
    let mut total = 0usize;
    (0..attrs_size / attr_size)
        .map(|i| {
            let entry = attrs_off.checked_add((i + 1).checked_mul(attr_size)?)? - 16;
            let entry = usize::try_from(entry).ok()?;
            let (off, size) = (e.u64(data, entry)?, e.u64(data, entry + 8)?);
            let (off, size) = (usize::try_from(off).ok()?, usize::try_from(size).ok()?);
            total = total.checked_add(size).filter(|&t| t <= data.len())?;
            let ids = data.get(off..off.checked_add(size)?)?;
            Some(ids.chunks_exact(8).filter_map(|id| e.u64(id, 0)).collect())
        })
        .collect()
}

/// Name of an event for a file without event names (an unfinished file).
fn fallback_name(ty: PerfEventType, config_id: u64) -> String {
    match ty {
        PerfEventType::Software(SoftwareCounterType::CpuClock) => "cpu-clock".into(),
        PerfEventType::Software(SoftwareCounterType::TaskClock) => "task-clock".into(),
        PerfEventType::Software(SoftwareCounterType::PageFaultsMaj) => "major-faults".into(),
        PerfEventType::Software(SoftwareCounterType::PageFaultsMin) => "minor-faults".into(),
        PerfEventType::Software(SoftwareCounterType::PageFaults) => "page-faults".into(),
        PerfEventType::Hardware(..) => "cycles".into(),
        PerfEventType::Tracepoint(id) => TRACEFS_NAMES
            .get_or_init(tracepoint_names)
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("tracepoint:{id}")),
        _ => format!("event:{config_id}"),
    }
}

/// [`tracepoint_names`], read once per process when a file first lacks
/// event names (thousands of small files: not once per attribute or file).
static TRACEFS_NAMES: std::sync::OnceLock<FxMap<u64, String>> = std::sync::OnceLock::new();

/// Every tracepoint of this machine's tracefs, `system:event` by id (only
/// right for a file recorded on this machine since its last boot).
fn tracepoint_names() -> FxMap<u64, String> {
    let mut names = FxMap::default();
    let root = std::path::Path::new("/sys/kernel/tracing/events");
    let Ok(systems) = std::fs::read_dir(root) else {
        return names;
    };
    for sys in systems.flatten() {
        let Ok(events) = std::fs::read_dir(sys.path()) else {
            continue;
        };
        for ev in events.flatten() {
            let Ok(id) = std::fs::read_to_string(ev.path().join("id")) else {
                continue;
            };
            if let Ok(id) = id.trim().parse() {
                names.insert(
                    id,
                    format!(
                        "{}:{}",
                        sys.file_name().to_string_lossy(),
                        ev.file_name().to_string_lossy()
                    ),
                );
            }
        }
    }
    names
}
