//! The `perf record` command line that wraps each profiled run, the
//! temporary directory its traces go to (removed when dropped), and the
//! check that perf can sample the user's own command here.
//!
//! Sampling: the `cpu-clock` software event with a fixed period (`-c`, in
//! nanoseconds of CPU time), so that every sample stands for exactly one
//! period of CPU and a function's cost is its samples times the period,
//! comparable with the command's own CPU seconds; frame-pointer call
//! stacks (`--call-graph fp`); only the command's process tree (perf starts
//! it); no build-id collection at the end (`-B`: the trace is read at once,
//! on this machine, so the binaries have not changed); and none of the
//! start-up work a new workload does not need (`--no-bpf-event`,
//! `--synth=no`: no records of BPF programs or of processes already
//! running), which cuts perf's start from about a second to a third.
//!
//! What it does not do: run the sweep or read the traces.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Highest sampling frequency accepted (perf's own default limit is
/// `kernel.perf_event_max_sample_rate`, usually 100 kHz or less).
pub const MAX_FREQUENCY_HZ: u32 = 50_000;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("--profile needs perf, which is not installed: install it (Debian/Ubuntu: `apt install linux-perf` or `linux-tools-$(uname -r)`, Fedora: `dnf install perf`)")]
    PerfMissing,
    #[error("--profile cannot sample here: perf failed ({detail}); kernel.perf_event_paranoid is {paranoid}: run as root, or allow sampling your own processes with `sudo sysctl kernel.perf_event_paranoid=2`")]
    CannotSample { paranoid: i32, detail: String },
    #[error("--profile-freq must be between 1 and {MAX_FREQUENCY_HZ} samples per second")]
    Frequency,
    #[error("cannot create a temporary directory for the profiles in {dir}: {source}")]
    TempDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read the profile of the run at n={n}: {message}")]
    Read { n: u64, message: String },
}

/// Wraps commands in `perf record`, writing each run's trace to one file in
/// a private temporary directory (runs are sequential; each run's trace is
/// read before the next one starts).
pub struct PerfWrapper {
    dir: tempfile::TempDir,
    period_ns: u64,
}

impl PerfWrapper {
    /// A wrapper sampling `frequency_hz` times per second of CPU, with its
    /// traces in a new directory under `parent` (the system's temporary
    /// directory when `None`).
    pub fn new(frequency_hz: u32, parent: Option<&Path>) -> Result<Self, ProfileError> {
        if frequency_hz == 0 || frequency_hz > MAX_FREQUENCY_HZ {
            return Err(ProfileError::Frequency);
        }
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let dir = tempfile::Builder::new()
            .prefix("slowlab-profile-")
            .tempdir_in(&parent)
            .map_err(|source| ProfileError::TempDir {
                dir: parent.clone(),
                source,
            })?;
        Ok(PerfWrapper {
            dir,
            period_ns: (1e9 / f64::from(frequency_hz)).round() as u64,
        })
    }

    /// CPU seconds one sample stands for.
    pub fn period_s(&self) -> f64 {
        self.period_ns as f64 * 1e-9
    }

    /// Where each run's trace is written (overwritten by the next run).
    pub fn trace_path(&self) -> PathBuf {
        self.dir.path().join("run.data")
    }

    /// `perf record … -- COMMAND…`; `{n}` placeholders stay in place.
    pub fn wrap(&self, command: &[String]) -> Vec<String> {
        let mut args: Vec<String> = [
            "perf",
            "record",
            "-q",
            "-B",
            "--no-bpf-event",
            "--synth=no",
            "-e",
            "cpu-clock",
            "-c",
            &self.period_ns.to_string(),
            "--call-graph",
            "fp",
            "-o",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(self.trace_path().to_string_lossy().into_owned());
        args.push("--".into());
        args.extend(command.iter().cloned());
        args
    }

    /// Checks that perf can sample a command of this user here, by
    /// recording `true`; the error says what to do. Returns the wall
    /// seconds that took: perf's own start and stop.
    pub fn check(&self) -> Result<f64, ProfileError> {
        check_perf(self)
    }
}

/// Records `true` under `wrapper`'s perf command line; returns its wall
/// seconds.
pub fn check_perf(wrapper: &PerfWrapper) -> Result<f64, ProfileError> {
    let args = wrapper.wrap(&["true".to_string()]);
    let start = std::time::Instant::now();
    let output = Command::new(&args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    let output = match output {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ProfileError::PerfMissing)
        }
        Err(e) => {
            return Err(ProfileError::CannotSample {
                paranoid: paranoid(),
                detail: e.to_string(),
            })
        }
        Ok(output) => output,
    };
    let wall_s = start.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(wrapper.trace_path());
    if output.status.success() {
        return Ok(wall_s);
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    // perf's own explanation is many lines; its first non-empty one says it.
    let detail = stderr
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no message")
        .to_string();
    Err(ProfileError::CannotSample {
        paranoid: paranoid(),
        detail,
    })
}

/// `kernel.perf_event_paranoid` (2, the kernel's default, when unreadable).
fn paranoid() -> i32 {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_samples_cpu_clock_at_a_fixed_period() {
        let w = PerfWrapper::new(4000, None).unwrap();
        let args = w.wrap(&["prog".into(), "{n}".into()]);
        let text = args.join(" ");
        assert!(
            text.starts_with("perf record -q -B --no-bpf-event --synth=no -e cpu-clock -c 250000 --call-graph fp -o "),
            "{text}"
        );
        assert!(text.ends_with(" -- prog {n}"), "{text}");
        assert!((w.period_s() - 250e-6).abs() < 1e-12);
        let dir = w.trace_path().parent().unwrap().to_path_buf();
        assert!(dir.is_dir());
        drop(w);
        assert!(!dir.exists(), "the temporary directory is removed");
    }

    #[test]
    fn a_frequency_out_of_range_is_refused() {
        assert!(matches!(
            PerfWrapper::new(0, None),
            Err(ProfileError::Frequency)
        ));
        assert!(PerfWrapper::new(MAX_FREQUENCY_HZ + 1, None).is_err());
    }
}
