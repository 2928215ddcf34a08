//! The record pass: opens the image (`crate::file` repairs an unfinished
//! header, `linux-perf-data` parses it), takes the metadata and build ids
//! from its feature sections, then feeds every record to the [`Builder`]
//! in time order (indexed in place by `crate::records`, for pipe-mode
//! files too: `linux-perf-data`'s iterator would allocate whatever a
//! damaged record's size claims), telling the
//! caller of progress and of each new binary along the way; and ends with the warnings the counts call for.
//! Also finds the kernel's build id from the header alone
//! ([`kernel_build_id`]), before the pass, to pick its kallsyms early.
//!
//! It decides nothing about a record's meaning (`attrs`, `decode`) and
//! keeps no tables of its own.

use linux_perf_data::{Endianness, Feature, PerfFileReader};
use slowlab_model::trace::Trace;

use super::attrs::{event_kinds, Ctx};
use super::{Builder, FirstPass, FramePass};
use crate::file;
use crate::records::{Endian, Records, Unstreamed, RECORD_BYTES, STREAM_STEP};
use crate::{guard, PerfError, ProgressFn};

/// Reads a whole perf.data image (already in memory) into a trace whose
/// frames are not yet symbolized.
pub fn read_bytes(data: &[u8], progress: ProgressFn) -> Result<Trace, PerfError> {
    let pass = FramePass::Addresses;
    read_bytes_with(data, progress, 1, pass, &mut |_, _| {}, None, &|_, _| {}).map(|(t, _)| t)
}

/// The build id of the kernel a perf.data file was recorded on, from its
/// build-id table (without reading its records); `None` when the file has
/// none or its header cannot be read.
pub fn kernel_build_id(data: &[u8]) -> Option<String> {
    let (patched, repair) = file::open(data).ok()?;
    if repair.pipe {
        return None;
    }
    let reader = guard(move || PerfFileReader::parse_file(patched))?.ok()?;
    let ids = guard(|| reader.perf_file.build_ids())?.ok()?;
    ids.into_values()
        .find(|info| info.path.as_slice() == b"[kernel.kallsyms]")
        .map(|info| crate::symbolize::hex(&info.build_id))
}

/// Like [`read_bytes`], interning stacks on a thread of its own unless
/// `threads` is 1, and calling `on_binary(path, recorded build id)` for
/// each user binary when its first frame is read (so its symbols can be
/// fetched meanwhile), and `release(from, to)` for each stretch of `data` that will
/// not be read again (so that a mapped file's pages can be given back: the
/// memory then stays flat however big the file; see [`release_marks`]).
/// With a `memory_limit`, the trace's memory is projected at a quarter, half
/// and three quarters of the records (see [`projected_model_bytes`]), and
/// the pass stops with [`PerfError::OverBudget`] when it passes the limit.
/// `pass` says what to make of the stacks; after a
/// [`FramePass::FramesOnly`] pass, its frame table and index come back too.
///
/// On more than one thread, a pass that keeps every address reads the
/// records as they are walked ([`Records::stream`]), so that a cold file is
/// read while the disk brings the rest (its memory then projected at a
/// quarter, half and three quarters of the bytes); when they cannot be
/// streamed in time order, it reads them again, indexed first.
pub(crate) fn read_bytes_with<'a>(
    data: &'a [u8],
    progress: ProgressFn,
    threads: usize,
    pass: FramePass<'a>,
    on_binary: &mut dyn FnMut(&str, Option<&str>),
    memory_limit: Option<u64>,
    release: &(dyn Fn(usize, usize) + Sync),
) -> Result<(Trace, Option<FirstPass<'a>>), PerfError> {
    if threads != 1 && matches!(pass, FramePass::Addresses) {
        let streamed = read_pass(
            data,
            progress,
            threads,
            FramePass::Addresses,
            on_binary,
            memory_limit,
            release,
            true,
        );
        if !matches!(streamed, Err(PerfError::Unstreamed)) {
            return streamed;
        }
    }
    read_pass(
        data,
        progress,
        threads,
        pass,
        on_binary,
        memory_limit,
        release,
        false,
    )
}

/// One pass of [`read_bytes_with`], streaming the records if `stream` (a
/// pass that keeps every address) and there are more than [`STREAM_FROM`]
/// bytes of them.
#[allow(clippy::too_many_arguments)]
fn read_pass<'a>(
    data: &'a [u8],
    progress: ProgressFn,
    threads: usize,
    pass: FramePass<'a>,
    on_binary: &mut dyn FnMut(&str, Option<&str>),
    memory_limit: Option<u64>,
    release: &(dyn Fn(usize, usize) + Sync),
    stream: bool,
) -> Result<(Trace, Option<FirstPass<'a>>), PerfError> {
    let (patched, repair) = file::open(data)?;
    let parsed = guard(move || {
        if repair.pipe {
            PerfFileReader::parse_pipe(patched)
        } else {
            PerfFileReader::parse_file(patched)
        }
    })
    .ok_or_else(|| PerfError::Header("malformed header".into()))?;
    // Only the header, attributes and features: the records are indexed
    // in place below (for pipes too), not read through its iterator,
    // which allocates what a record's size field claims.
    let PerfFileReader { perf_file, .. } = parsed.map_err(|e| PerfError::Header(e.to_string()))?;

    let mut b = Builder::new();
    let indexed = match pass {
        FramePass::Addresses => None,
        FramePass::FramesOnly => {
            b.frames_only = true;
            None
        }
        FramePass::Functions(FirstPass { frames, records }) => {
            b.use_first_pass_frames(frames);
            Some(records)
        }
    };
    let endian = perf_file.endian();
    let e = Endian {
        big: matches!(endian, Endianness::BigEndian),
    };
    if repair.unfinished {
        b.t.stats.unfinished_file = true;
        b.t.stats.truncated_bytes = repair.truncated_bytes;
        b.t.stats.warnings.push(match repair.cut_short {
            None => format!(
                "the file was not finished (perf record was killed before it wrote its header); read every complete record, {} trailing bytes skipped; stop perf with Ctrl-C or SIGINT next time",
                repair.truncated_bytes
            ),
            Some(claimed) => format!(
                "the file is cut short (a copy cut off, or a full disk): its header says {} of records, {} are there; the analysis covers the part before the cut",
                size_in_words(claimed),
                size_in_words(repair.data_size),
            ),
        });
    }
    if repair.dropped_features {
        b.t.stats.warnings.push(
            "the file's feature sections point outside the file (truncated copy?); host, event names and build ids are unavailable".into(),
        );
    }

    // Metadata.
    let meta = &mut b.t.meta;
    meta.hostname = perf_file.hostname().ok().flatten().map(str::to_owned);
    meta.os_release = perf_file.os_release().ok().flatten().map(str::to_owned);
    meta.arch = perf_file.arch().ok().flatten().map(str::to_owned);
    meta.perf_version = perf_file.perf_version().ok().flatten().map(str::to_owned);
    // Parsed here, not by `linux-perf-data`: a damaged count there makes it
    // reserve gigabytes, an abort no `catch_unwind` can stop.
    meta.cmdline = perf_file
        .feature_section_data(Feature::CMDLINE)
        .map(|d| string_list(d, e))
        .unwrap_or_default();
    meta.nr_cpus = perf_file.nr_cpus().ok().flatten().map(|n| n.nr_cpus_online);
    meta.wall_clock = perf_file
        .clock_data()
        .ok()
        .flatten()
        .filter(|c| c.wall_clock_ns > 0)
        .map(|c| slowlab_model::trace::WallClock {
            clock_ns: c.clockid_time_ns,
            unix_ns: c.wall_clock_ns,
        });

    // Build ids by path.
    if let Ok(ids) = perf_file.build_ids() {
        b.build_ids = ids
            .into_values()
            .map(|info| (info.path, crate::symbolize::hex(&info.build_id)))
            .collect();
    }

    let file = (!repair.pipe).then_some(data);
    let ctx = event_kinds(&mut b, &perf_file, file, e, endian);
    if let Some(arch) = &b.t.meta.arch {
        let here = std::env::consts::ARCH;
        if arch != here {
            b.t.stats.warnings.push(format!(
                "the trace was recorded on {arch}, this machine is {here}: its binaries and kernel symbols are not here, so functions will be unnamed; analyze it on an {arch} machine"
            ));
            b.foreign = true;
        }
    }

    // The records, in place, for files and pipes alike.
    let start = usize::try_from(repair.data_offset).unwrap_or(usize::MAX);
    let end =
        usize::try_from(repair.data_offset.saturating_add(repair.data_size)).unwrap_or(usize::MAX);
    let bytes = end.saturating_sub(start);
    let expected = indexed
        .as_ref()
        .map_or(bytes / RECORD_BYTES, |r| r.entries.len());
    b.intern_on_thread(expected, bytes, threads != 1);
    let (stopped, keep) = if stream && bytes >= STREAM_FROM {
        let range = (start, end);
        (
            read_streamed(
                &mut b,
                &ctx,
                data,
                range,
                progress,
                on_binary,
                memory_limit,
                release,
            )?,
            None,
        )
    } else {
        let recs = match indexed {
            Some(recs) => recs,
            None => Records::index(data, start, end, e, &ctx.attrs, threads != 1, release),
        };
        let range = (start, end);
        read_indexed(
            &mut b,
            &ctx,
            recs,
            range,
            progress,
            on_binary,
            memory_limit,
            release,
        )?
    };
    if let Some(why) = &stopped {
        b.t.stats.warnings.push(format!(
            "stopped reading at a corrupt record after {} records ({why}); the analysis covers the part before it",
            b.t.stats.records
        ));
    }
    if !b.finish_interning() {
        return Err(PerfError::Interning);
    }
    announce_binaries(&mut b, on_binary);
    let first = keep.and_then(|records| {
        b.take_frame_map()
            .map(|frames| FirstPass { frames, records })
    });
    Ok((finish(b), first))
}

/// Bytes of records from which a pass may stream them: any file but a
/// nearly empty one (a thread of its own for the walk costs tens of
/// microseconds).
const STREAM_FROM: usize = 512;

/// Reads the records as [`Records::stream`] hands them over; returns why
/// the walk stopped early, if it did. With a `memory_limit`, the trace's
/// memory is projected when the records read pass a quarter, half and
/// three quarters of the bytes (see [`projected_model_bytes`]): past the
/// limit, the pass stops with [`PerfError::OverBudget`].
#[allow(clippy::too_many_arguments)]
fn read_streamed<'a>(
    b: &mut Builder,
    ctx: &Ctx,
    data: &'a [u8],
    (start, end): (usize, usize),
    progress: ProgressFn,
    on_binary: &mut dyn FnMut(&str, Option<&str>),
    memory_limit: Option<u64>,
    release: &(dyn Fn(usize, usize) + Sync),
) -> Result<Option<String>, PerfError> {
    let bytes = (end - start) as u64;
    b.reserve_samples((end - start) / RECORD_BYTES);
    let mut released = start;
    let (mut read, mut quarters, mut over_budget) = (0, 0, false);
    let streamed = Records::stream(
        data,
        start,
        end,
        ctx.e,
        &ctx.attrs,
        stream_step(end - start),
        &mut |recs, batch, below| {
            for &entry in batch {
                if let Some(rec) = recs.get(entry) {
                    b.on_record(ctx, entry.attr(), rec);
                    announce_binaries(b, on_binary);
                }
            }
            read += batch.len();
            let done = (below - start) as u64;
            progress("read", done, bytes);
            if below > released {
                release(released, below);
                released = below;
            }
            if let Some(limit) = memory_limit {
                // The records all told, as many per byte as so far.
                let total =
                    |done: u64| (read as u128 * bytes as u128 / done.max(1) as u128) as usize;
                while quarters < 3 && done * 4 >= bytes * (quarters + 1) {
                    quarters += 1;
                    over_budget |= projected_model_bytes(b, read, total(done)) > limit;
                }
            }
            !over_budget
        },
    )
    .map_err(|Unstreamed| match over_budget {
        true => PerfError::OverBudget,
        false => PerfError::Unstreamed,
    })?;
    progress("read", bytes, bytes);
    if end > released {
        release(released, end);
    }
    b.t.stats.records = streamed.walked;
    Ok(streamed.stopped)
}

/// Bytes walked at least between two batches of a stream of `bytes` of
/// records: a thirty-second of them, from 4 KiB to [`STREAM_STEP`] (the
/// reading starts after two such steps, and each batch is sorted and merged
/// on its own).
fn stream_step(bytes: usize) -> usize {
    (bytes / 32).clamp(MIN_STREAM_STEP, STREAM_STEP)
}

/// The least of [`stream_step`]: 4 KiB; in tests, less, so that fixtures
/// of kilobytes are handed over in several batches, as big files are.
const MIN_STREAM_STEP: usize = if cfg!(test) { 64 } else { 4 << 10 };

/// Reads the records of the time-ordered index `recs`; returns why the
/// walk stopped early, if it did, and the index when it is kept for a
/// second pass.
#[allow(clippy::too_many_arguments)]
fn read_indexed<'a>(
    b: &mut Builder,
    ctx: &Ctx,
    mut recs: Records<'a>,
    (start, end): (usize, usize),
    progress: ProgressFn,
    on_binary: &mut dyn FnMut(&str, Option<&str>),
    memory_limit: Option<u64>,
    release: &(dyn Fn(usize, usize) + Sync),
) -> Result<(Option<String>, Option<Records<'a>>), PerfError> {
    b.t.stats.records = recs.walked;
    let n = recs.entries.len() as u64;
    b.reserve_samples(recs.entries.len());
    let marks = release_marks(&recs.entries, end);
    let mut released = start;
    let total = recs.entries.len();
    let projections = [total / 4, total / 2, total * 3 / 4];
    for (i, &entry) in recs.entries.iter().enumerate() {
        if let Some(limit) = memory_limit {
            if i > 0 && projections.contains(&i) && projected_model_bytes(b, i, total) > limit {
                return Err(PerfError::OverBudget);
            }
        }
        if i % RELEASE_EVERY == 0 {
            progress("read", i as u64, n);
            let low = marks[i / RELEASE_EVERY];
            if low > released {
                release(released, low);
                released = low;
            }
        }
        if let Some(rec) = recs.get(entry) {
            b.on_record(ctx, entry.attr(), rec);
            announce_binaries(b, on_binary);
        }
    }
    progress("read", n, n);
    if end > released {
        release(released, end);
    }
    // The index goes before the frames are made (unless the second pass
    // is to read the same records again).
    let stopped = recs.stopped.take();
    Ok((stopped, b.frames_only.then_some(recs)))
}

/// The memory the trace being made would take at the end of the pass,
/// projected from its first `done` records of `total`: the time-ordered
/// index as it is (8 bytes a record), and the sample columns (32 bytes a
/// sample), stack nodes (32 with their share of the interning table) and
/// frames (48 with theirs) in proportion. Nodes and frames grow slower
/// than the records (see `intern::by_square_root`): the projection errs
/// high, toward the read by function. On system-wide build traces of 1.23
/// and 2.28 GB it stays under 1 GiB (one pass peaks at 435 and 617 MB of
/// RSS); a trace whose stacks share few callers (up to a stack node per
/// frame) passes it.
fn projected_model_bytes(b: &Builder, done: usize, total: usize) -> u64 {
    let (nodes, frames) = b.sink.counts();
    let samples = b.t.samples.time_ns.len();
    let grown = |count: usize, bytes: u64| {
        (count as u128 * total as u128 / done.max(1) as u128) as u64 * bytes
    };
    total as u64 * 8 + grown(samples, 32) + grown(nodes, 32) + grown(frames, 48)
}

/// Calls `on_binary(path, recorded build id)` for each user binary whose
/// first frame was seen since the last call.
fn announce_binaries(b: &mut Builder, on_binary: &mut dyn FnMut(&str, Option<&str>)) {
    for m in b.new_binaries.drain(..) {
        let m = &b.t.modules[m.ix()];
        on_binary(&b.t.strings[m.path.ix()], m.build_id.as_deref());
    }
}

/// Records read between two looks at what can be released.
const RELEASE_EVERY: usize = 1 << 15;

/// For each run of [`RELEASE_EVERY`] records of the time-ordered index,
/// where the lowest of the records from that run on lies in the file (or
/// `end`): everything below it is read. perf writes records in rounds of
/// per-CPU buffers, so time order stays close to file order and the mark
/// follows the reading closely.
fn release_marks(entries: &[crate::records::Entry], end: usize) -> Vec<usize> {
    let mut marks = vec![end; entries.len().div_ceil(RELEASE_EVERY)];
    let mut low = end;
    for (i, entry) in entries.iter().enumerate().rev() {
        if let Some(pos) = entry.file_pos() {
            low = low.min(pos);
        }
        if i % RELEASE_EVERY == 0 {
            marks[i / RELEASE_EVERY] = low;
        }
    }
    marks
}

/// A perf header string list: `u32 count`, then `count` times `u32 len`
/// and `len` bytes (NUL-padded). Stops at the first entry that does not fit.
fn string_list(data: &[u8], e: Endian) -> Vec<String> {
    let count = e.u32(data, 0).unwrap_or(0) as usize;
    let mut out = Vec::new();
    let mut p = 4;
    for _ in 0..count {
        let Some(len) = e.u32(data, p).map(|l| l as usize) else {
            break;
        };
        let Some(s) = p.checked_add(4 + len).and_then(|end| data.get(p + 4..end)) else {
            break;
        };
        let s = &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())];
        out.push(String::from_utf8_lossy(s).into_owned());
        p += 4 + len;
    }
    out
}

/// Warnings from the counts, the time range, build ids.
fn finish(mut b: Builder) -> Trace {
    if b.t.stats.lost_events > 0 {
        b.t.stats.warnings.push(format!(
            "the kernel dropped {} events because perf could not keep up; record with a lower --freq or a bigger buffer (perf record -m)",
            b.t.stats.lost_events
        ));
    }
    if b.t.stats.unparsed_records > 0 {
        b.t.stats.warnings.push(format!(
            "skipped {} records that could not be parsed",
            b.t.stats.unparsed_records
        ));
    }
    if b.first_ns == u64::MAX {
        b.first_ns = 0;
    }
    b.t.meta.start_ns = b.first_ns;
    b.t.meta.end_ns = b.last_ns.max(b.first_ns);

    if b.foreign {
        for m in &mut b.t.modules {
            m.symbol_error = Some("recorded on another architecture".into());
        }
    }
    let t = std::mem::take(&mut b.t);
    crate::drop_later(b);
    t
}

/// A size as a warning says it: bytes below a megabyte, else megabytes.
fn size_in_words(bytes: u64) -> String {
    if bytes < 1_000_000 {
        format!("{bytes} bytes")
    } else {
        format!("{:.1} MB", bytes as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::rtype;

    #[test]
    fn release_marks_never_pass_a_record_still_to_read() {
        use crate::records::Entry;
        // Time order with one record far behind in the file (position 10,
        // read last) and one from decompressed data (not in the file).
        let n = RELEASE_EVERY * 3;
        let mut entries: Vec<Entry> = (0..n)
            .map(|i| Entry::new(1000 + i * 100, i == 5, 0))
            .collect();
        entries[n - 1] = Entry::new(10, false, 0);
        let end = 1000 + n * 100;
        let marks = release_marks(&entries, end);
        assert_eq!(marks.len(), 3);
        for (block, &mark) in marks.iter().enumerate() {
            let still_to_read = entries[block * RELEASE_EVERY..]
                .iter()
                .filter_map(|e| e.file_pos())
                .min()
                .unwrap_or(end);
            assert_eq!(mark, still_to_read);
        }
        assert_eq!(marks[2], 10);
        // Without the straggler the marks follow the reading.
        entries[n - 1] = Entry::new(1000 + (n - 1) * 100, false, 0);
        let marks = release_marks(&entries, end);
        assert_eq!(marks[1], 1000 + RELEASE_EVERY * 100);
    }

    #[test]
    fn a_streamed_pass_reads_what_an_indexed_one_does_or_gives_way() {
        let fixture = |name: &str| {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
            std::fs::read(dir.join("tests/fixtures").join(name)).expect(name)
        };
        let pass_within = |data: &[u8], limit: Option<u64>, stream: bool| {
            let (progress, release) = (&|_: &str, _, _| {}, &|_, _| {});
            let on_binary = &mut |_: &str, _: Option<&str>| {};
            let addresses = FramePass::Addresses;
            read_pass(
                data, progress, 2, addresses, on_binary, limit, release, stream,
            )
            .map(|(trace, _)| trace)
        };
        let pass = |data: &[u8], stream| pass_within(data, None, stream);
        for name in [
            "hot-fp.perfdata",
            "hot-pipe.perfdata",
            "sched.perfdata",
            "killed.perfdata",
        ] {
            let data = fixture(name);
            let (_, repair) = file::open(&data).unwrap();
            assert!(
                repair.data_size >= STREAM_FROM as u64,
                "{name} is not streamed"
            );
            let streamed = pass(&data, true).expect(name);
            let indexed = pass(&data, false).expect(name);
            assert!(
                streamed.stats.records > 30,
                "{name}: {}",
                streamed.stats.records
            );
            assert_eq!(format!("{streamed:?}"), format!("{indexed:?}"), "{name}");
        }
        // Within a memory limit, the memory is projected as the stream goes:
        // past the limit the pass stops, as an indexed one does.
        let data = fixture("killed.perfdata");
        let (small, big) = (Some(8 << 10), Some(1 << 30));
        for stream in [true, false] {
            let stopped = pass_within(&data, small, stream);
            assert!(matches!(stopped, Err(PerfError::OverBudget)), "{stream}");
        }
        let within = pass_within(&data, big, true).expect("within the limit");
        let indexed = pass_within(&data, big, false).expect("within the limit");
        assert_eq!(format!("{within:?}"), format!("{indexed:?}"));
        // Compressed records are decompressed after the walk: the stream
        // gives way, and `read_bytes_with` reads the file indexed.
        let data = fixture("hot-zstd.perfdata");
        assert!(file::open(&data).unwrap().1.data_size >= STREAM_FROM as u64);
        assert!(matches!(pass(&data, true), Err(PerfError::Unstreamed)));
        let (progress, release) = (&|_: &str, _, _| {}, &|_, _| {});
        let on_binary = &mut |_: &str, _: Option<&str>| {};
        let read = read_bytes_with(
            &data,
            progress,
            2,
            FramePass::Addresses,
            on_binary,
            None,
            release,
        );
        assert_eq!(read.expect("indexed").0.samples.len(), 37);
    }

    /// `data` (a perf.data file) with a PERF_RECORD_FINISHED_ROUND after
    /// every `round` of its records, and `n` PERF_RECORD_LOST_SAMPLES
    /// records of `lost` each after the last, their sample ids all zeros
    /// (time 0), as `perf record` writes them when it stops.
    fn with_rounds_and_lost_samples(data: &[u8], round: usize, n: usize, lost: u64) -> Vec<u8> {
        let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
        let header = |ty: u32, size: u16| {
            let mut h = ty.to_le_bytes().to_vec();
            h.extend_from_slice(&0u16.to_le_bytes());
            h.extend_from_slice(&size.to_le_bytes());
            h
        };
        let (offset, size) = (u64_at(data, 40) as usize, u64_at(data, 48) as usize);
        let end = offset + size;
        let mut records = Vec::new();
        let (mut pos, mut count) = (offset, 0);
        while pos < end {
            let len = u16::from_le_bytes([data[pos + 6], data[pos + 7]]) as usize;
            records.extend_from_slice(&data[pos..pos + len]);
            pos += len;
            count += 1;
            if count % round == 0 {
                records.extend(header(rtype::FINISHED_ROUND, 8));
            }
        }
        for _ in 0..n {
            // The count, then a 40-byte sample id.
            records.extend(header(rtype::LOST_SAMPLES, 56));
            records.extend_from_slice(&lost.to_le_bytes());
            records.extend_from_slice(&[0; 40]);
        }
        let added = records.len() - size;
        let mut out = data[..offset].to_vec();
        out.extend_from_slice(&records);
        out.extend_from_slice(&data[end..]);
        out[48..56].copy_from_slice(&(records.len() as u64).to_le_bytes());
        // The feature sections' headers follow the records: each section
        // moves by what was added.
        let features: u32 = (0..4).map(|i| u64_at(data, 72 + 8 * i).count_ones()).sum();
        for i in 0..features as usize {
            let at = end + added + 16 * i;
            let moved = u64_at(&out, at) + added as u64;
            out[at..at + 8].copy_from_slice(&moved.to_le_bytes());
        }
        out
    }

    #[test]
    fn lost_samples_written_at_the_end_with_time_zero_are_streamed() {
        // perf writes its count of lost samples after every other record,
        // with time 0: that must not make the stream give way (the whole
        // read was then done twice, once streamed and once indexed).
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let data = std::fs::read(dir.join("sched.perfdata")).unwrap();
        let (progress, release) = (&|_: &str, _, _| {}, &|_, _| {});
        // Rounds of 4 records: the stream hands records over before the
        // last ones; without lost samples it streams as it is.
        for lost_records in [0, 4] {
            let data = with_rounds_and_lost_samples(&data, 4, lost_records, 7);
            let pass = |stream| {
                let on_binary = &mut |_: &str, _: Option<&str>| {};
                let addresses = FramePass::Addresses;
                read_pass(
                    &data, progress, 2, addresses, on_binary, None, release, stream,
                )
                .map(|(trace, _)| trace)
            };
            let indexed = pass(false).expect("indexed");
            assert_eq!(indexed.stats.lost_events, 7 * lost_records as u64);
            assert_eq!(indexed.samples.len() + indexed.events.len(), 31);
            let streamed = pass(true).unwrap_or_else(|e| panic!("{lost_records} lost: {e:?}"));
            assert_eq!(format!("{streamed:?}"), format!("{indexed:?}"));
        }
    }

    #[test]
    fn the_kernel_build_id_is_read_from_the_header() {
        let fixture = |name: &str| {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
            std::fs::read(dir.join(name)).unwrap()
        };
        assert_eq!(
            kernel_build_id(&fixture("sched.perfdata")).as_deref(),
            Some("48dc540c8b76393804ca8088dbfa7d42911a9444")
        );
        // User binaries only; pipe mode has no build-id table; not perf.data.
        assert_eq!(kernel_build_id(&fixture("hot-fp.perfdata")), None);
        assert_eq!(kernel_build_id(&fixture("hot-pipe.perfdata")), None);
        assert_eq!(kernel_build_id(b"PERFILE2 and then garbage"), None);
    }
}
