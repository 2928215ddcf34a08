//! The records of a scheduler recording as [`super::parse_sched`] keeps them
//! ([`SchedRecords`]): their bytes as the file has them, every whole record of every
//! EVENTS section one after the other, each decoded only when it is read. A decoded record
//! takes 64 bytes (and an allocation for the few kinds with a path, arguments or a name),
//! most records 32 in the file: kept decoded, the records of a 62 MB recording took 123
//! MB beside the trace being built from them. It does not order them: the ring's order,
//! nearly time order, is the file's; the trace's reader sorts.

use super::{decode_record, u64_at, Head, RecordExtra, RecordKind, SchedRecord, COMM_LEN};

/// Where a record is among [`SchedRecords`] (its first byte's offset): from
/// [`SchedRecords::positions`], or a MAPS section's `from_record`.
pub type RecordAt = usize;

/// A recording's records, in the file's order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchedRecords {
    bytes: Vec<u8>,
    len: usize,
}

impl SchedRecords {
    /// How many records there are.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where the next record appended will be.
    pub(super) fn end(&self) -> RecordAt {
        self.bytes.len()
    }

    /// Appends the whole records at the start of `batch` (an EVENTS section's body);
    /// false when the batch ends in one that is cut or of no known kind, whose bytes and
    /// the rest are left out.
    pub(super) fn push_batch(&mut self, batch: &[u8]) -> bool {
        let mut at = 0;
        let mut whole = true;
        while at < batch.len() {
            match record_len(&batch[at..]) {
                Some(n) => {
                    at += n;
                    self.len += 1;
                }
                None => {
                    whole = false;
                    break;
                }
            }
        }
        self.bytes.extend_from_slice(&batch[..at]);
        whole
    }

    /// Gives back the memory the appends reserved beyond the records.
    pub(super) fn shrink_to_fit(&mut self) {
        self.bytes.shrink_to_fit();
    }

    /// Every record, decoded, in the file's order.
    pub fn iter(&self) -> impl Iterator<Item = SchedRecord> + '_ {
        self.positions().filter_map(|at| self.get(at))
    }

    /// The records of one kind, decoded (the others are passed over without decoding).
    pub fn of_kind(&self, kind: RecordKind) -> impl Iterator<Item = SchedRecord> + '_ {
        self.positions()
            .filter(move |&at| self.kind_at(at) == Some(kind))
            .filter_map(|at| self.get(at))
    }

    /// Where each record is, in the file's order.
    pub fn positions(&self) -> impl Iterator<Item = RecordAt> + '_ {
        let mut at = 0;
        std::iter::from_fn(move || {
            let here = at;
            at += record_len(self.bytes.get(here..)?)?;
            Some(here)
        })
    }

    /// The record at `at`, decoded; `None` past the last.
    pub fn get(&self, at: RecordAt) -> Option<SchedRecord> {
        decode_record(self.bytes.get(at..)?).map(|(r, _)| r)
    }

    /// The time of the record at `at`, without decoding the rest of it.
    pub fn time_at(&self, at: RecordAt) -> Option<u64> {
        self.bytes.get(at..at + 8).map(|b| u64_at(b, 0))
    }

    /// The kind of the record at `at`.
    pub fn kind_at(&self, at: RecordAt) -> Option<RecordKind> {
        RecordKind::from_u8(*self.bytes.get(at + 22)?)
    }

    /// Every record, decoded (for tests that look at them by their index).
    pub fn to_vec(&self) -> Vec<SchedRecord> {
        self.iter().collect()
    }
}

/// The length of the whole record at the start of `b`; `None` when it is cut or of no
/// known kind (what [`decode_record`] refuses).
fn record_len(b: &[u8]) -> Option<usize> {
    let head = b.get(..super::RECORD_LEN)?;
    let kind = RecordKind::from_u8(head[22])?;
    let len = kind.record_len(super::u32_at(head, 16));
    (len <= b.len()).then_some(len)
}

/// Records as the BPF program would have written them (synthetic recordings, tests).
impl FromIterator<SchedRecord> for SchedRecords {
    fn from_iter<I: IntoIterator<Item = SchedRecord>>(records: I) -> SchedRecords {
        let mut all = SchedRecords::default();
        for r in records {
            let encoded = encode(&r);
            all.push_batch(&encoded);
        }
        all
    }
}

impl From<Vec<SchedRecord>> for SchedRecords {
    fn from(records: Vec<SchedRecord>) -> SchedRecords {
        records.into_iter().collect()
    }
}

/// The bytes [`decode_record`] reads `r` from.
fn encode(r: &SchedRecord) -> Vec<u8> {
    let path = r.path().unwrap_or("").as_bytes();
    let b = if r.kind == RecordKind::Path {
        path.len() as u32
    } else {
        r.b
    };
    let tail = match r.kind {
        RecordKind::SysEnter | RecordKind::SysExit | RecordKind::Block => r.value,
        RecordKind::Path => (r.value & 0xffff_ffff) | 0xffff_ffff << 32,
        _ => Head::stacks(r.kstack, r.ustack),
    };
    let head = Head {
        time_ns: r.time_ns,
        tid: r.tid,
        a: r.a,
        b,
        cpu: r.cpu,
        kind: r.kind.to_u8(),
        c: r.c,
        tail,
    };
    let mut out = head.bytes().to_vec();
    match r.extra.as_deref() {
        Some(RecordExtra::Comm(c)) => {
            let mut comm = [0u8; COMM_LEN];
            let n = c.len().min(COMM_LEN);
            comm[..n].copy_from_slice(&c.as_bytes()[..n]);
            out.extend_from_slice(&comm);
        }
        Some(RecordExtra::Args(args)) => args
            .iter()
            .for_each(|a| out.extend_from_slice(&a.to_le_bytes())),
        Some(RecordExtra::Path(_)) => out.extend_from_slice(path),
        None => {}
    }
    match r.kind {
        RecordKind::MajorFault => out.extend_from_slice(&r.value.to_le_bytes()),
        RecordKind::PageFault => {
            out.extend_from_slice(&r.value.to_le_bytes());
            out.extend_from_slice(&r.ip.to_le_bytes());
        }
        _ => {}
    }
    // What the kind's length says: a comm or arguments the record lacked, as zeros, and a
    // path's padding.
    out.resize(r.kind.record_len(b), 0);
    out
}
