//! The trace's own description: the payload of the first event of the file
//! (`EventTrace` header, hook 0x0000), a `TRACE_LOGFILE_HEADER`: buffer
//! size, pointer size, CPU count, clock (QPC frequency, system time or CPU
//! cycles), start time, events and buffers lost. Its layout has two pointers
//! in the middle, so it depends on the pointer size. Nothing else here.
use slowlab_model::le::{get_i64, get_u32};

/// What the logfile header says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogfileHeader {
    pub buffer_size: u32,
    /// Windows version as `major.minor.build` (from `Version` and
    /// `ProviderVersion`).
    pub os_version: String,
    pub number_of_processors: u32,
    pub pointer_size: u32,
    pub events_lost: u32,
    pub buffers_lost: u32,
    pub cpu_mhz: u32,
    /// `TimerResolution`, in 100 ns units.
    pub timer_resolution: u32,
    /// Ticks per second of the event timestamps.
    pub clock_frequency: u64,
    /// 1 = QPC, 2 = system time, 3 = CPU cycle counter.
    pub clock_type: u32,
    /// Trace start as a Windows FILETIME (100 ns since 1601).
    pub start_filetime: i64,
    pub boot_filetime: i64,
    pub logger_name: String,
    pub log_file_name: String,
}

/// A NUL-terminated UTF-16 string at `at`, and the offset after it.
pub fn utf16z(b: &[u8], at: usize) -> (String, usize) {
    let mut units = Vec::new();
    let mut i = at;
    while let Some(pair) = b.get(i..i + 2) {
        i += 2;
        let u = u16::from_le_bytes([pair[0], pair[1]]);
        if u == 0 {
            break;
        }
        units.push(u);
    }
    (String::from_utf16_lossy(&units), i.max(at))
}

/// Reads a `TRACE_LOGFILE_HEADER` payload written with `pointer_size`
/// (4 or 8, from the event's header kind). `None` when it is too short.
pub fn parse(p: &[u8], pointer_size: usize) -> Option<LogfileHeader> {
    let version = get_u32(p, 4)?;
    let pointer_in_payload = get_u32(p, 44)?;
    // The header's own PointerSize wins over the event header's kind.
    let ptr = match pointer_in_payload {
        4 | 8 => pointer_in_payload as usize,
        _ => pointer_size,
    };
    // LoggerName and LogFileName pointers, then a 172-byte
    // TIME_ZONE_INFORMATION, then 8-byte aligned LARGE_INTEGERs.
    let times = (56 + 2 * ptr + 172).next_multiple_of(8);
    let perf_freq = get_i64(p, times + 8)?;
    let clock_type = get_u32(p, times + 24)?;
    let cpu_mhz = get_u32(p, 52)?;
    let clock_frequency = match clock_type {
        2 => 10_000_000,
        3 => cpu_mhz as u64 * 1_000_000,
        _ => perf_freq.max(0) as u64,
    };
    let (logger_name, next) = utf16z(p, times + 32);
    let (log_file_name, _) = utf16z(p, next);
    Some(LogfileHeader {
        buffer_size: get_u32(p, 0)?,
        os_version: format!(
            "{}.{}.{}",
            version & 0xff,
            (version >> 8) & 0xff,
            get_u32(p, 8)?
        ),
        number_of_processors: get_u32(p, 12)?,
        pointer_size: ptr as u32,
        events_lost: get_u32(p, 48)?,
        buffers_lost: get_u32(p, times + 28)?,
        cpu_mhz,
        timer_resolution: get_u32(p, 24)?,
        clock_frequency,
        clock_type,
        start_filetime: get_i64(p, times + 16)?,
        boot_filetime: get_i64(p, times)?,
        logger_name,
        log_file_name,
    })
}
