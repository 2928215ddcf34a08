//! Progress bars on stderr with `indicatif`. They draw only when stderr is a
//! terminal, so pipes, files and tests get clean output; nothing here ever
//! writes to stdout.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use slowlab_model::units::seconds;
use slowlab_sweep::{Measurement, Progress};

/// A bar whose length is the projected run time of the sweep, in ms.
pub struct SweepBar {
    bar: ProgressBar,
}

impl SweepBar {
    pub fn new() -> Self {
        let bar = ProgressBar::with_draw_target(Some(1), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        bar.set_message("warming up");
        SweepBar { bar }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Progress for SweepBar {
    fn run_finished(&mut self, n: u64, m: &Measurement, spent_s: f64, remaining_s: f64) {
        let total_ms = ((spent_s + remaining_s) * 1000.0).max(1.0) as u64;
        self.bar.set_length(total_ms);
        self.bar.set_position((spent_s * 1000.0) as u64);
        self.bar.set_message(format!(
            "n={n}: {} CPU · about {} left",
            seconds(m.cpu_s),
            seconds(remaining_s)
        ));
    }

    fn message(&mut self, text: &str) {
        if !self.bar.is_hidden() {
            self.bar.println(format!("note: {text}"));
        }
    }
}

/// Output of `slowlab lab`: scenario lines on stdout (stderr when stdout
/// carries JSON), what is being done on a spinner on stderr.
pub struct LabProgress {
    bar: ProgressBar,
    lines_to_stderr: bool,
}

impl LabProgress {
    pub fn new(lines_to_stderr: bool) -> Self {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        LabProgress {
            bar,
            lines_to_stderr,
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl slowlab_lab::LabOutput for LabProgress {
    fn line(&mut self, text: &str) {
        // Printing through the bar keeps the spinner below the lines.
        self.bar.suspend(|| {
            if self.lines_to_stderr {
                eprintln!("{text}");
            } else {
                println!("{text}");
            }
        });
    }

    fn status(&mut self, text: &str) {
        self.bar.set_message(text.to_string());
    }

    fn sweep_progress(&mut self) -> &mut dyn Progress {
        self
    }
}

impl Progress for LabProgress {
    fn run_finished(&mut self, n: u64, m: &Measurement, _spent_s: f64, remaining_s: f64) {
        self.bar.set_message(format!(
            "n={n}: {} · about {} left in this sweep",
            seconds(m.cpu_s),
            seconds(remaining_s)
        ));
    }
}

/// Runs `read` with a bar for reading and symbolizing a trace (`stage
/// done/total`, on stderr) that it moves through the progress function it
/// is given, and clears the bar after.
pub fn while_reading<T>(read: impl FnOnce(&(dyn Fn(&str, u64, u64) + Sync)) -> T) -> T {
    let bar = ProgressBar::with_draw_target(Some(1), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} {wide_bar} {percent}%")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let result = read(&|stage, done, total| {
        bar.set_length(total.max(1));
        bar.set_position(done);
        bar.set_message(stage.to_string());
    });
    bar.finish_and_clear();
    result
}
