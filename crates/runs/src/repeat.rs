//! `slowlab diagnose --repeat N`: the check of N, the run directories'
//! names (`DIR/run-1` … `DIR/run-N`, each a complete diagnose directory,
//! so that `slowlab diff A/run-* -- B/run-*` takes them as runs), and the
//! summary across the runs: each run's wall time (its critical path's),
//! the median, and the answer of the median run, as data and as text.
//!
//! The median run is the run ranked in the middle by wall time (the lower
//! of the two middle ones for an even count); the median is the usual
//! one (the mean of the two middle values for an even count).
//!
//! Pure apart from [`stale_runs`], which lists a directory: the recording
//! and the analysis of each run are the binary's.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// At most this many runs.
pub const MAX_REPEAT: usize = 100;

/// N from `--repeat N`: a whole number from 1 to [`MAX_REPEAT`]; the
/// error is one line.
pub fn parse_repeat(s: &str) -> Result<usize, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if (1..=MAX_REPEAT as u64).contains(&n) => Ok(n as usize),
        _ => Err(format!(
            "--repeat takes a whole number of runs from 1 to {MAX_REPEAT}, not `{s}`"
        )),
    }
}

/// The directory of run `i` (from 1) under `dir`.
pub fn run_dir(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("run-{i}"))
}

/// The `run-K` directories under `dir` with K > `n`: left by an earlier,
/// longer `--repeat`, a `run-*` pattern would take them as runs of this
/// one. Sorted by K.
pub fn stale_runs(dir: &Path, n: usize) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut stale: Vec<(usize, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let k: usize = name.strip_prefix("run-")?.parse().ok()?;
            (k > n && e.path().is_dir()).then(|| (k, e.path()))
        })
        .collect();
    stale.sort();
    stale.into_iter().map(|(_, p)| p).collect()
}

/// One finished run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RepeatRun {
    /// From 1.
    pub run: usize,
    pub dir: PathBuf,
    /// Its critical path's wall time; `None` when there is no path.
    pub wall_s: Option<f64>,
    pub exit_code: i32,
    /// The critical path's answer (its summary sentence).
    pub answer: Option<String>,
}

/// The runs together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RepeatSummary {
    /// The command, as given.
    pub command: Vec<String>,
    /// How many runs were asked for.
    pub asked: usize,
    pub runs: Vec<RepeatRun>,
    /// Of the runs with a wall time.
    pub median_s: Option<f64>,
    pub min_s: Option<f64>,
    pub max_s: Option<f64>,
    /// The run ranked in the middle by wall time (its number, from 1).
    pub median_run: Option<usize>,
    /// Ctrl-C stopped the runs early; `runs` are the finished ones.
    pub interrupted: bool,
}

/// Summarizes the finished `runs` of `command` (`asked` were asked for).
pub fn summarize(
    command: &[String],
    asked: usize,
    runs: Vec<RepeatRun>,
    interrupted: bool,
) -> RepeatSummary {
    let mut timed: Vec<(f64, usize)> = runs
        .iter()
        .filter_map(|r| r.wall_s.map(|w| (w, r.run)))
        .collect();
    timed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let median_s = match timed.len() {
        0 => None,
        n if n % 2 == 1 => Some(timed[n / 2].0),
        n => Some((timed[n / 2 - 1].0 + timed[n / 2].0) / 2.0),
    };
    RepeatSummary {
        command: command.to_vec(),
        asked,
        median_s,
        min_s: timed.first().map(|t| t.0),
        max_s: timed.last().map(|t| t.0),
        median_run: (!timed.is_empty()).then(|| timed[(timed.len() - 1) / 2].1),
        runs,
        interrupted,
    }
}

impl RepeatSummary {
    /// The summary as text for the terminal: a line per run, the median
    /// with the range, the median run's answer, how to compare.
    pub fn text(&self) -> String {
        let mut out = format!(
            "{} of {} runs of `{}`{}:\n",
            self.runs.len(),
            self.asked,
            self.command.join(" "),
            if self.interrupted {
                " (stopped by Ctrl-C)"
            } else {
                ""
            }
        );
        for r in &self.runs {
            let wall = r
                .wall_s
                .map_or("no critical path".to_string(), |w| format!("{w:.3} s"));
            let exit = if r.exit_code == 0 {
                String::new()
            } else {
                format!("  exit code {}", r.exit_code)
            };
            out.push_str(&format!(
                "  run {:>3}  {wall:>10}  {}{exit}\n",
                r.run,
                r.dir.display()
            ));
        }
        if let (Some(median), Some(lo), Some(hi), Some(run)) =
            (self.median_s, self.min_s, self.max_s, self.median_run)
        {
            let spread = if median > 0.0 {
                format!(", spread {:.1}% of the median", (hi - lo) / median * 100.0)
            } else {
                String::new()
            };
            out.push_str(&format!(
                "median {median:.3} s (min {lo:.3}, max {hi:.3} s{spread})\n"
            ));
            if let Some(answer) = self
                .runs
                .iter()
                .find(|r| r.run == run)
                .and_then(|r| r.answer.as_deref())
            {
                out.push_str(&format!("the median run (run {run}): {answer}\n"));
            }
        }
        if let Some(first) = self.runs.first() {
            let pattern = first.dir.with_file_name("run-*");
            out.push_str(&format!(
                "compare with another set of runs: slowlab diff OTHER/run-* -- {}\n",
                pattern.display()
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(i: usize, wall: Option<f64>) -> RepeatRun {
        RepeatRun {
            run: i,
            dir: PathBuf::from(format!("why/run-{i}")),
            wall_s: wall,
            exit_code: 0,
            answer: wall.map(|w| format!("`prog` ran {w:.2} s")),
        }
    }

    fn cmd() -> Vec<String> {
        vec!["prog".into(), "8".into()]
    }

    #[test]
    fn repeat_takes_1_to_100_and_nothing_else() {
        assert_eq!(parse_repeat("1"), Ok(1));
        assert_eq!(parse_repeat("100"), Ok(100));
        for bad in ["0", "101", "-1", "three", "", "2.5"] {
            let err = parse_repeat(bad).unwrap_err();
            assert!(err.contains("1 to 100") && !err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn the_median_run_of_an_odd_count_is_the_middle_one() {
        let s = summarize(
            &cmd(),
            3,
            vec![run(1, Some(0.30)), run(2, Some(0.10)), run(3, Some(0.20))],
            false,
        );
        assert_eq!((s.median_s, s.median_run), (Some(0.20), Some(3)));
        assert_eq!((s.min_s, s.max_s), (Some(0.10), Some(0.30)));
        let text = s.text();
        assert!(
            text.contains("median 0.200 s (min 0.100, max 0.300 s"),
            "{text}"
        );
        assert!(
            text.contains("the median run (run 3): `prog` ran 0.20 s"),
            "{text}"
        );
        assert!(
            text.contains("slowlab diff OTHER/run-* -- why/run-*"),
            "{text}"
        );
    }

    #[test]
    fn an_even_count_takes_the_mean_of_the_middle_two_and_the_lower_run() {
        let s = summarize(
            &cmd(),
            4,
            vec![
                run(1, Some(0.4)),
                run(2, Some(0.1)),
                run(3, Some(0.2)),
                run(4, Some(0.3)),
            ],
            false,
        );
        assert!((s.median_s.unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(s.median_run, Some(3));
    }

    #[test]
    fn runs_without_a_path_are_listed_but_not_timed() {
        let s = summarize(&cmd(), 5, vec![run(1, None), run(2, Some(0.5))], true);
        assert_eq!((s.median_s, s.median_run), (Some(0.5), Some(2)));
        let text = s.text();
        assert!(
            text.starts_with("2 of 5 runs of `prog 8` (stopped by Ctrl-C)"),
            "{text}"
        );
        assert!(text.contains("no critical path"), "{text}");
        let none = summarize(&cmd(), 1, vec![run(1, None)], false);
        assert_eq!((none.median_s, none.median_run), (None, None));
    }

    #[test]
    fn stale_runs_are_the_higher_numbered_run_directories() {
        let d = tempfile::tempdir().unwrap();
        for name in ["run-1", "run-2", "run-3", "run-10", "run-x", "other"] {
            std::fs::create_dir(d.path().join(name)).unwrap();
        }
        std::fs::write(d.path().join("run-4"), "a file").unwrap();
        let stale = stale_runs(d.path(), 2);
        assert_eq!(stale, [d.path().join("run-3"), d.path().join("run-10")]);
    }
}
