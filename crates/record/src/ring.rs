//! Sizing perf's ring buffers for `--ring SECONDS` from this machine's
//! event rate: [`plan`] runs `perf record` with the same events into a pipe
//! for about two seconds ([`MEASURE`]), [`PipeRates`] reads that stream (the
//! perf.data pipe format: the events' attributes, then records carrying
//! their time and CPU) and counts the bytes each CPU's buffer receives per
//! second, and [`pages_for`] picks the power-of-two buffer (perf's buffers
//! come in powers of two) that holds 0.75 to 1.5 times SECONDS at the
//! average CPU's rate.
//!
//! The average, not the busiest CPU's: threads move between CPUs within
//! seconds, so the busiest CPU of a two-second measurement is seldom the
//! busiest of the next minutes (sized by it, a snapshot held 6 s for
//! `--ring 3`), while the sum over CPUs stays. A CPU busier than the
//! average holds fewer seconds, a quieter one more; and the rate is that of
//! the moment measured: a busier period later holds fewer seconds, a
//! quieter one more. It does not record the trace itself
//! (`session` does), nor bound the side files (`companions` does).

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::args::{perf_args_to, ring_pages, tracepoint_exists, Buffers};
use crate::perf_process::PerfProcess;
use crate::signals::StopSignals;
use crate::{Config, RecordError};
use slowlab_model::le::{u32_at, u64_at};

/// How long the event rate is measured, from perf's first sample.
pub(crate) const MEASURE: Duration = Duration::from_secs(2);

/// The start of the measurement left out (perf's own start-up activity).
const SETTLE_NS: u64 = 300_000_000;

/// Time bins of the byte counts.
const BIN_NS: u64 = 10_000_000;

/// The ring-buffer size chosen for a recording.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RingPlan {
    /// Pages per CPU (a power of two).
    pub pages: u64,
    /// About how many seconds a CPU's buffer holds at the average rate
    /// measured (the requested seconds when the rate is unknown).
    pub seconds: f64,
}

/// The window the side files keep for `--ring SECONDS`: 1.5 × SECONDS (at
/// least 2 s), the most perf's buffers are sized for (quieter CPUs reach
/// further back).
pub(crate) fn side_window(secs: u32) -> Duration {
    Duration::from_secs_f64((f64::from(secs) * 1.5).max(2.0))
}

/// Measures the event rate and sizes the buffers for `secs` seconds; the
/// companions should be running already, as their own syscalls are part
/// of the rate. A stop signal meanwhile ends the recording before it
/// starts ([`RecordError::Interrupted`]); a rate that cannot be measured falls
/// back on [`ring_pages`] with a warning.
pub(crate) fn plan(
    cfg: &Config,
    secs: u32,
    signals: &mut StopSignals,
    warnings: &mut Vec<String>,
) -> Result<RingPlan, RecordError> {
    let secs = secs.max(1);
    let limit = max_pages(cfg.cpus);
    eprintln!(
        "slowlab: measuring the event rate for {} s to size the ring buffers",
        MEASURE.as_secs()
    );
    match measure(cfg, signals)? {
        Ok(rate) => {
            let (pages, seconds) = pages_for(rate, secs, limit);
            if seconds < f64::from(secs) * 0.7 {
                warnings.push(format!(
                    "the ring buffers are capped at {} MiB per CPU (a quarter of memory or 1 GiB): they hold about {seconds:.1} s, not {secs}; ask for fewer seconds or a lower --freq",
                    pages / 256
                ));
            }
            eprintln!(
                "slowlab: ring buffers of {} KiB per CPU hold about {seconds:.1} s at {:.2} MB/s per CPU; Ctrl-C or SIGTERM stops, `slowlab record --save` (or SIGUSR2) saves a snapshot",
                pages * 4,
                rate / 1e6
            );
            Ok(RingPlan { pages, seconds })
        }
        Err(why) => {
            warnings.push(format!(
                "could not measure the event rate ({why}): the ring buffers are sized by an estimate and may hold more or fewer than {secs} s"
            ));
            let pages = ring_pages(secs, cfg.freq, cfg.cpus).min(limit);
            Ok(RingPlan {
                pages,
                seconds: f64::from(secs),
            })
        }
    }
}

/// The per-CPU pages (a power of two, from 16 to `limit`) that hold 0.75
/// to 1.5 times `secs` seconds at `rate` bytes a second (the smallest that
/// holds 0.75 times), and the seconds they hold.
pub(crate) fn pages_for(rate: f64, secs: u32, limit: u64) -> (u64, f64) {
    let least = 0.75 * rate * f64::from(secs) / 4096.0;
    let pages = if least.is_finite() && least > 1.0 {
        1u64 << (least.log2().ceil() as u32).min(40)
    } else {
        1
    };
    let pages = pages.clamp(16, limit.max(16));
    let seconds = if rate > 0.0 {
        pages as f64 * 4096.0 / rate
    } else {
        f64::from(secs)
    };
    (pages, seconds)
}

/// The most pages per CPU: all CPUs' buffers together within a quarter of
/// memory, and 1 GiB per CPU.
fn max_pages(cpus: u32) -> u64 {
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(4 << 30, |kib| kib * 1024);
    let per_cpu = (mem / 4 / u64::from(cpus.max(1))).min(1 << 30) / 4096;
    // The largest power of two not above it.
    1u64 << (63 - per_cpu.max(16).leading_zeros())
}

/// The average CPU's bytes a second over [`MEASURE`]; the outer error is a
/// stop signal, the inner one why the rate could not be measured.
fn measure(cfg: &Config, signals: &mut StopSignals) -> Result<Result<f64, String>, RecordError> {
    let args = perf_args_to(
        cfg,
        &tracepoint_exists,
        Path::new("-"),
        Buffers::Stream(1024),
        false,
    );
    let mut perf = PerfProcess::spawn(&args, false, Stdio::piped())?;
    let Some(mut stdout) = perf.take_stdout() else {
        return Ok(Err("perf's output could not be read".into()));
    };
    let (first_tx, first_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut rates = PipeRates::default();
        let mut buf = vec![0u8; 1 << 16];
        let mut told = false;
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            rates.feed(&buf[..n]);
            if !told && rates.first_ns.is_some() {
                told = first_tx.send(()).is_ok();
            }
        }
        rates
    });
    let started = Instant::now();
    let mut measuring_since: Option<Instant> = None;
    loop {
        for sig in signals.take() {
            if sig == libc::SIGUSR2 {
                eprintln!("slowlab: SIGUSR2: nothing to save yet (the recording has not started)");
                continue;
            }
            perf.kill();
            let _ = reader.join();
            return Err(RecordError::Interrupted { signal: sig });
        }
        if measuring_since.is_none() && first_rx.try_recv().is_ok() {
            measuring_since = Some(Instant::now());
        }
        if let Ok(Some(_)) = perf.try_wait() {
            break;
        }
        match measuring_since {
            Some(t) if t.elapsed() >= MEASURE => break,
            None if started.elapsed() > Duration::from_secs(30) => break,
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    perf.signal(libc::SIGINT);
    let exit = perf.wait_bounded(Duration::from_secs(10), Duration::from_secs(30));
    let lines = perf.lines();
    let rates = reader.join().unwrap_or_default();
    match rates.per_cpu(SETTLE_NS) {
        Some(rate) => Ok(Ok(rate)),
        None => {
            let last = lines
                .iter()
                .rev()
                .find(|l| !l.trim().is_empty() && !l.starts_with("[ perf record:"))
                .cloned();
            Ok(Err(match (exit, last) {
                (Err(_), _) => "perf did not stop".into(),
                (_, Some(line)) => line,
                _ => "perf recorded less than a second of events".into(),
            }))
        }
    }
}

// perf_event_attr.sample_type bits and record types (linux/perf_event.h).
const SAMPLE_IP: u64 = 1 << 0;
const SAMPLE_TID: u64 = 1 << 1;
const SAMPLE_TIME: u64 = 1 << 2;
const SAMPLE_ADDR: u64 = 1 << 3;
const SAMPLE_ID: u64 = 1 << 6;
const SAMPLE_CPU: u64 = 1 << 7;
const SAMPLE_STREAM_ID: u64 = 1 << 9;
const SAMPLE_IDENTIFIER: u64 = 1 << 16;
const RECORD_SAMPLE: u32 = 9;
const HEADER_ATTR: u32 = 64;
const HEADER_TRACING_DATA: u32 = 66;
const AUXTRACE: u32 = 71;

/// One event's `sample_type` and whether its other records carry the
/// sample id fields (`sample_id_all`).
#[derive(Debug, Clone, Copy)]
struct Attr {
    sample_type: u64,
    id_all: bool,
}

/// Bytes per CPU and time from a perf.data pipe stream, fed as it comes.
#[derive(Debug, Default)]
pub(crate) struct PipeRates {
    buf: Vec<u8>,
    /// Bytes still to skip (the payload after a tracing-data record).
    skip: u64,
    header_done: bool,
    broken: bool,
    attrs: Vec<Attr>,
    by_id: HashMap<u64, usize>,
    /// The time of the first sample.
    first_ns: Option<u64>,
    last_ns: u64,
    /// Per CPU, bytes per [`BIN_NS`] bin from `first_ns`.
    bins: BTreeMap<u32, Vec<u64>>,
}

impl PipeRates {
    pub(crate) fn feed(&mut self, mut data: &[u8]) {
        if self.broken {
            return;
        }
        if self.skip > 0 {
            let n = (self.skip as usize).min(data.len());
            self.skip -= n as u64;
            data = &data[n..];
        }
        self.buf.extend_from_slice(data);
        let mut at = 0;
        if !self.header_done {
            if self.buf.len() < 16 {
                return;
            }
            if &self.buf[..8] != b"PERFILE2" {
                self.broken = true;
                return;
            }
            self.header_done = true;
            at = 16;
        }
        while self.skip == 0 && self.buf.len() >= at + 8 {
            let kind = u32_at(&self.buf, at);
            let size = usize::from(u16::from_le_bytes([self.buf[at + 6], self.buf[at + 7]]));
            if size < 8 {
                self.broken = true;
                return;
            }
            if self.buf.len() < at + size {
                break;
            }
            let record = self.buf[at..at + size].to_vec();
            at += size;
            self.skip = self.record(kind, &record);
            // A payload that follows the record: skip what is buffered of it.
            let n = (self.skip as usize).min(self.buf.len() - at);
            self.skip -= n as u64;
            at += n;
        }
        self.buf.drain(..at);
    }

    /// Accounts one record; returns the bytes of payload that follow it.
    fn record(&mut self, kind: u32, r: &[u8]) -> u64 {
        match kind {
            HEADER_ATTR if r.len() >= 8 + 48 => {
                let attr_size = u32_at(r, 12) as usize;
                let attr = Attr {
                    sample_type: u64_at(r, 8 + 24),
                    id_all: u64_at(r, 8 + 40) & (1 << 18) != 0,
                };
                self.attrs.push(attr);
                let mut at = 8 + attr_size;
                while at + 8 <= r.len() {
                    self.by_id.insert(u64_at(r, at), self.attrs.len() - 1);
                    at += 8;
                }
                0
            }
            HEADER_TRACING_DATA if r.len() >= 12 => u64::from(u32_at(r, 8)),
            AUXTRACE if r.len() >= 16 => u64_at(r, 8),
            RECORD_SAMPLE => {
                if let Some((time, cpu)) = self.sample_time_cpu(r) {
                    if self.first_ns.is_none() && time > 0 {
                        self.first_ns = Some(time);
                    }
                    self.count(time, cpu, r.len());
                }
                0
            }
            k if k < HEADER_ATTR => {
                if let Some((time, cpu)) = self.trailer_time_cpu(r) {
                    self.count(time, cpu, r.len());
                }
                0
            }
            _ => 0,
        }
    }

    fn attr_of(&self, id: Option<u64>) -> Option<Attr> {
        match id {
            Some(id) => self
                .by_id
                .get(&id)
                .and_then(|&i| self.attrs.get(i))
                .copied(),
            None => self.attrs.first().copied(),
        }
    }

    fn sample_time_cpu(&self, r: &[u8]) -> Option<(u64, u32)> {
        let first = self.attrs.first()?;
        let id = if first.sample_type & SAMPLE_IDENTIFIER != 0 {
            Some(u64_at(r.get(..16)?, 8))
        } else {
            None
        };
        let st = self.attr_of(id)?.sample_type;
        // The fields before the CPU, in the kernel's order.
        let mut at = 8;
        let mut time = None;
        for bit in [
            SAMPLE_IDENTIFIER,
            SAMPLE_IP,
            SAMPLE_TID,
            SAMPLE_TIME,
            SAMPLE_ADDR,
            SAMPLE_ID,
            SAMPLE_STREAM_ID,
        ] {
            if st & bit != 0 {
                if bit == SAMPLE_TIME {
                    time = Some(u64_at(r.get(..at + 8)?, at));
                }
                at += 8;
            }
        }
        if st & SAMPLE_CPU == 0 {
            return None;
        }
        Some((time?, u32_at(r.get(..at + 4)?, at)))
    }

    fn trailer_time_cpu(&self, r: &[u8]) -> Option<(u64, u32)> {
        let first = self.attrs.first()?;
        let mut end = r.len();
        let id = if first.sample_type & SAMPLE_IDENTIFIER != 0 {
            end = end.checked_sub(8)?;
            Some(u64_at(r, end))
        } else {
            None
        };
        let attr = self.attr_of(id)?;
        if !attr.id_all {
            return None;
        }
        let st = attr.sample_type;
        let mut cpu = None;
        let mut time = None;
        for (bit, what) in [
            (SAMPLE_CPU, 1),
            (SAMPLE_STREAM_ID, 0),
            (SAMPLE_ID, 0),
            (SAMPLE_TIME, 2),
        ] {
            if st & bit != 0 {
                end = end.checked_sub(8)?;
                match what {
                    1 => cpu = Some(u32_at(r, end)),
                    2 => time = Some(u64_at(r, end)),
                    _ => {}
                }
            }
        }
        Some((time?, cpu?))
    }

    fn count(&mut self, time: u64, cpu: u32, bytes: usize) {
        let Some(first) = self.first_ns else { return };
        if time < first {
            return;
        }
        self.last_ns = self.last_ns.max(time);
        let bin = ((time - first) / BIN_NS) as usize;
        if bin > 100_000 {
            return;
        }
        let bins = self.bins.entry(cpu).or_default();
        if bins.len() <= bin {
            bins.resize(bin + 1, 0);
        }
        bins[bin] += bytes as u64;
    }

    /// The average CPU's bytes a second after the first `settle_ns` (over
    /// the CPUs that had events); `None` with less than 0.8 s of events
    /// after it.
    pub(crate) fn per_cpu(&self, settle_ns: u64) -> Option<f64> {
        let first = self.first_ns?;
        let from_bin = settle_ns.div_ceil(BIN_NS) as usize;
        let to_bin = ((self.last_ns - first) / BIN_NS) as usize;
        if to_bin < from_bin + 80 {
            return None;
        }
        let seconds = (to_bin - from_bin) as f64 * BIN_NS as f64 / 1e9;
        let bytes: u64 = self
            .bins
            .values()
            .map(|b| b.iter().take(to_bin).skip(from_bin).sum::<u64>())
            .sum();
        Some(bytes as f64 / seconds / self.bins.len().max(1) as f64)
    }
}

#[cfg(test)]
mod tests;
