//! Finding the scheduler's tick in the running kernel, for CPU samples taken on it
//! ([`SampleClock::Tick`](super::options::SampleClock)): the function of the tick's timer
//! and the timer interrupt's entry code, from `/proc/kallsyms` ([`KernelSymbols`]), and
//! the tick's rate, `CONFIG_HZ` ([`tick_hz`]). It attaches nothing.

use std::fs;
use std::io::Read;
use std::time::Duration;

/// The kernel's symbols, as `/proc/kallsyms` lists them: its text, read once, and
/// searched for the few names the recorder needs (not parsed into a table: a load needs
/// four addresses of some 200,000 symbols).
pub(crate) struct KernelSymbols {
    text: String,
}

impl KernelSymbols {
    /// Reads `/proc/kallsyms`; `None` when it cannot be read or hides the addresses (all 0:
    /// not root, or `kernel.kptr_restrict`).
    pub(crate) fn read() -> Option<KernelSymbols> {
        let symbols = KernelSymbols {
            text: fs::read_to_string("/proc/kallsyms").ok()?,
        };
        let shown = symbols.symbols().any(|(address, _)| address != 0);
        shown.then_some(symbols)
    }

    /// Every (address, name).
    fn symbols(&self) -> impl Iterator<Item = (u64, &str)> {
        self.text.lines().filter_map(|line| {
            let mut fields = line.split_whitespace();
            let address = u64::from_str_radix(fields.next()?, 16).ok()?;
            Some((address, fields.nth(1)?))
        })
    }

    /// The address of the symbol `name` (the first listed: the kernel's, before modules').
    pub(crate) fn address(&self, name: &str) -> Option<u64> {
        self.symbols()
            .find(|&(address, n)| n == name && address != 0)
            .map(|(address, _)| address)
    }

    /// The code of the function `name`: its address to the next symbol's.
    pub(crate) fn range(&self, name: &str) -> Option<(u64, u64)> {
        let start = self.address(name)?;
        let end = self
            .symbols()
            .map(|(address, _)| address)
            .filter(|&address| address > start)
            .min()?;
        Some((start, end))
    }
}

/// Where the tick's samples are taken in the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TickSource {
    /// The tick's timer function: `tick_nohz_handler` (6.9 on) or `tick_sched_timer`.
    pub(crate) function: u64,
    /// The timer interrupt's entry code (`asm_sysvec_apic_timer_interrupt`): a sample's
    /// kernel stack begins after its frame.
    pub(crate) entry: (u64, u64),
    /// Ticks a second on a busy CPU.
    pub(crate) hz: u32,
}

impl TickSource {
    /// The tick of the running kernel, or why it cannot be sampled.
    pub(crate) fn find(symbols: Option<&KernelSymbols>) -> Result<TickSource, String> {
        if !cfg!(target_arch = "x86_64") {
            return Err("the tick's samples are x86-64 only".into());
        }
        let symbols = symbols.ok_or("/proc/kallsyms cannot be read or hides the addresses")?;
        let function = ["tick_nohz_handler", "tick_sched_timer"]
            .iter()
            .find_map(|name| symbols.address(name))
            .ok_or("the kernel has no high-resolution tick (tick_nohz_handler)")?;
        if !high_resolution_timers().ok_or("/proc/timer_list cannot be read")? {
            return Err(
                "the kernel's timers run in low-resolution mode, where the tick is \
                        not a timer of its own"
                    .into(),
            );
        }
        let entry = symbols
            .range("asm_sysvec_apic_timer_interrupt")
            .ok_or("the kernel has no asm_sysvec_apic_timer_interrupt")?;
        let hz = tick_hz().ok_or("the tick's rate (CONFIG_HZ) cannot be found")?;
        Ok(TickSource {
            function,
            entry,
            hz,
        })
    }
}

/// Whether the kernel's timers run in high-resolution mode (`/proc/timer_list` gives the
/// clocks a resolution of 1 ns), where the tick is a timer (`hrtimer`) of its own and
/// on_tick sees it expire; in low-resolution mode the tick's function is called directly.
fn high_resolution_timers() -> Option<bool> {
    let text = fs::read_to_string("/proc/timer_list").ok()?;
    Some(resolution_is_high(&text))
}

/// Whether a `/proc/timer_list`'s clocks have a resolution of 1 ns.
fn resolution_is_high(timer_list: &str) -> bool {
    timer_list
        .lines()
        .filter_map(|l| l.trim().strip_prefix(".resolution:"))
        .any(|r| r.trim() == "1 nsecs")
}

/// The kernel's `CONFIG_HZ`: from its configuration (`/boot/config-RELEASE`,
/// `/proc/config.gz`), else measured from `jiffies` in `/proc/timer_list` over 200 ms.
pub(crate) fn tick_hz() -> Option<u32> {
    kernel_config().and_then(|c| config_hz(&c)).or_else(|| {
        let (t0, j0) = jiffies_now()?;
        std::thread::sleep(Duration::from_millis(200));
        let (t1, j1) = jiffies_now()?;
        hz_from_jiffies(t1.checked_sub(t0)?, j1.checked_sub(j0)?)
    })
}

/// The running kernel's configuration text, where the system keeps it.
fn kernel_config() -> Option<String> {
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    if let Ok(text) = fs::read_to_string(format!("/boot/config-{}", release.trim())) {
        return Some(text);
    }
    let gz = fs::read("/proc/config.gz").ok()?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// `CONFIG_HZ=N` of a kernel configuration.
fn config_hz(config: &str) -> Option<u32> {
    config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok())
        .filter(|&hz| hz > 0)
}

/// The clock (`now at N nsecs`) and `jiffies` of `/proc/timer_list`.
fn jiffies_now() -> Option<(u64, u64)> {
    let text = fs::read_to_string("/proc/timer_list").ok()?;
    let now = text.lines().find_map(|l| {
        l.strip_prefix("now at ")?
            .strip_suffix(" nsecs")?
            .parse()
            .ok()
    })?;
    let jiffies = text
        .lines()
        .find_map(|l| l.strip_prefix("jiffies: ")?.trim().parse().ok())?;
    Some((now, jiffies))
}

/// The `CONFIG_HZ` a kernel can have (100, 250, 300 or 1000) nearest to `jiffies` ticks in
/// `ns` nanoseconds.
fn hz_from_jiffies(ns: u64, jiffies: u64) -> Option<u32> {
    if ns == 0 || jiffies == 0 {
        return None;
    }
    let measured = jiffies as f64 * 1e9 / ns as f64;
    [100u32, 250, 300, 1000].into_iter().min_by(|a, b| {
        let da = (f64::from(*a) - measured).abs();
        let db = (f64::from(*b) - measured).abs();
        da.total_cmp(&db)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_hz_reads_the_setting_not_its_neighbours() {
        let config = "CONFIG_HZ_250=y\n# CONFIG_HZ_1000 is not set\nCONFIG_HZ=250\n";
        assert_eq!(config_hz(config), Some(250));
        assert_eq!(config_hz("CONFIG_HZ_1000=y\n"), None);
    }

    #[test]
    fn jiffies_rate_rounds_to_a_rate_a_kernel_can_have() {
        assert_eq!(hz_from_jiffies(200_000_000, 51), Some(250));
        assert_eq!(hz_from_jiffies(200_000_000, 199), Some(1000));
        assert_eq!(hz_from_jiffies(200_000_000, 21), Some(100));
        assert_eq!(hz_from_jiffies(0, 21), None);
    }

    #[test]
    fn high_resolution_is_a_resolution_of_one_nanosecond() {
        let clock =
            |ns: u64| format!("cpu: 0\n clock 0:\n  .index:      0\n  .resolution: {ns} nsecs\n");
        assert!(resolution_is_high(&clock(1)));
        assert!(!resolution_is_high(&clock(4_000_000)));
        assert!(!resolution_is_high(""));
    }

    #[test]
    fn a_functions_range_ends_at_the_next_symbol() {
        let symbols = KernelSymbols {
            text: "0000000000000140 T b\n\
                   0000000000000100 T a\n\
                   0000000000000120 T asm_sysvec_apic_timer_interrupt\n"
                .into(),
        };
        assert_eq!(
            symbols.range("asm_sysvec_apic_timer_interrupt"),
            Some((0x120, 0x140))
        );
        assert_eq!(symbols.range("b"), None);
        assert_eq!(symbols.address("missing"), None);
    }
}
