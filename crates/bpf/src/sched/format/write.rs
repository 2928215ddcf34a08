//! Writing a scheduler recording ([`SchedWriter`]): the header, then sections as the
//! recorder's drain hands it records, threads, maps and stacks, and the END section. It
//! does not read the ring buffer or the stack map; the drain does.

use std::io::{self, Write};

use super::{
    SchedEnd, SAMPLES_ON_TICK, SCHED_MAGIC, TAG_COMMAND, TAG_END, TAG_EVENTS, TAG_MAPS,
    TAG_SAMPLES, TAG_STACK, TAG_STEAL, TAG_THREAD,
};
use slowlab_model::host_steal::CpuTimes;

/// Writes a scheduler recording section by section.
#[derive(Debug)]
pub struct SchedWriter<W: Write> {
    out: W,
    events: Vec<u8>,
    records: u64,
}

/// Records are gathered into EVENTS sections of about this many bytes.
const EVENTS_SECTION: usize = 1 << 16;

impl<W: Write> SchedWriter<W> {
    /// Writes the magic and the header.
    pub fn new(
        mut out: W,
        start_mono_ns: u64,
        start_real_ns: u64,
        nr_cpus: u32,
        sample_freq: u32,
    ) -> io::Result<Self> {
        out.write_all(SCHED_MAGIC)?;
        out.write_all(&start_mono_ns.to_le_bytes())?;
        out.write_all(&start_real_ns.to_le_bytes())?;
        out.write_all(&nr_cpus.to_le_bytes())?;
        out.write_all(&sample_freq.to_le_bytes())?;
        Ok(SchedWriter {
            out,
            events: Vec::with_capacity(EVENTS_SECTION + 64),
            records: 0,
        })
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Whether records are gathered that no EVENTS section holds yet.
    pub fn has_pending_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Where the sections go.
    pub fn out_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// Copies whole sections another writer wrote (a ring's window), after the records
    /// gathered so far; `records` of them are records.
    pub fn sections(&mut self, bytes: &[u8], records: u64) -> io::Result<()> {
        self.flush_events()?;
        self.records += records;
        self.out.write_all(bytes)
    }

    /// Adds one record as the ring buffer gave it (its bytes are kept as they are: the
    /// program writes them little-endian on the machines BPF runs on here).
    pub fn record(&mut self, raw: &[u8]) -> io::Result<()> {
        self.events.extend_from_slice(raw);
        self.records += 1;
        if self.events.len() >= EVENTS_SECTION {
            self.flush_events()?;
        }
        Ok(())
    }

    fn section(&mut self, tag: u32, parts: &[&[u8]]) -> io::Result<()> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let len = u32::try_from(len).map_err(|_| io::Error::other("section too long"))?;
        self.out.write_all(&tag.to_le_bytes())?;
        self.out.write_all(&len.to_le_bytes())?;
        for p in parts {
            self.out.write_all(p)?;
        }
        Ok(())
    }

    /// Writes the records gathered so far as an EVENTS section.
    pub fn flush_events(&mut self) -> io::Result<()> {
        if self.events.is_empty() {
            return Ok(());
        }
        let events = std::mem::take(&mut self.events);
        let result = self.section(TAG_EVENTS, &[&events]);
        self.events = events;
        self.events.clear();
        result
    }

    /// A THREAD section (after the records gathered so far).
    pub fn thread(&mut self, pid: u32, tid: u32, comm: &str) -> io::Result<()> {
        self.flush_events()?;
        self.section(
            TAG_THREAD,
            &[&pid.to_le_bytes(), &tid.to_le_bytes(), comm.as_bytes()],
        )
    }

    /// A MAPS section (after the records gathered so far).
    pub fn maps(&mut self, pid: u32, text: &str) -> io::Result<()> {
        self.flush_events()?;
        self.section(TAG_MAPS, &[&pid.to_le_bytes(), text.as_bytes()])
    }

    /// A COMMAND section: the command the recording runs, as process `pid`.
    pub fn command(&mut self, pid: u32, args: &[String]) -> io::Result<()> {
        self.flush_events()?;
        let mut text = Vec::new();
        for a in args {
            text.extend_from_slice(a.as_bytes());
            text.push(0);
        }
        self.section(TAG_COMMAND, &[&pid.to_le_bytes(), &text])
    }

    /// A STACK section.
    pub fn stack(&mut self, id: u32, kernel: bool, addrs: &[u64]) -> io::Result<()> {
        self.flush_events()?;
        let bytes: Vec<u8> = addrs.iter().flat_map(|a| a.to_le_bytes()).collect();
        self.section(TAG_STACK, &[&id.to_le_bytes(), &[u8::from(kernel)], &bytes])
    }

    /// The SAMPLES section: the CPU samples are taken on the scheduler's tick.
    pub fn samples_on_tick(&mut self) -> io::Result<()> {
        self.section(TAG_SAMPLES, &[&SAMPLES_ON_TICK.to_le_bytes()])
    }

    /// A STEAL section: the machine's CPU time over what the file holds, and the host's
    /// steal of it.
    pub fn steal(&mut self, times: CpuTimes) -> io::Result<()> {
        self.flush_events()?;
        self.section(
            TAG_STEAL,
            &[&times.wanted.to_le_bytes(), &times.stolen.to_le_bytes()],
        )
    }

    /// The END section; flushes and returns the output.
    pub fn finish(mut self, end: SchedEnd) -> io::Result<W> {
        self.flush_events()?;
        self.section(
            TAG_END,
            &[
                &end.stop_ns.to_le_bytes(),
                &end.dropped.to_le_bytes(),
                &end.stacks_lost.to_le_bytes(),
                &end.records.to_le_bytes(),
            ],
        )?;
        self.out.flush()?;
        Ok(self.out)
    }
}
