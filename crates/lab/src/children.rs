//! The command line of the child programs slowlab launches (the lab's, and
//! the sweep's known workloads, `burn`), `slowlab __child …`: one
//! subcommand per program, each dispatching to the scenario module that
//! owns it. The binary flattens `LabChild` into its hidden `__child`
//! command; scenarios build the matching argument lists next to their code
//! (a test parses every one of them back through this enum).
//!
//! What it does not do: the programs' work; the scenario modules do.

use clap::Subcommand;

use std::path::PathBuf;

use crate::scenarios::{log_probe, notify_buffer, teardown_lock, topdown_alloc, working_set_cap};
use crate::LabError;

#[derive(Subcommand, Debug)]
pub enum LabChild {
    /// topdown-alloc: place n 64 KiB blocks and report the time taken.
    Topdown {
        #[arg(long, value_enum)]
        placement: topdown_alloc::Placement,
        #[arg(long)]
        n: u64,
    },
    /// log-probe: launch n log writers one after the other, timed.
    LogLauncher {
        #[arg(long, value_enum)]
        naming: log_probe::Naming,
        #[arg(long)]
        n: u64,
        #[arg(long)]
        dir: PathBuf,
    },
    /// notify-buffer: create and delete files on a private tmpfs under a watcher.
    Notify {
        #[arg(long, value_enum)]
        watcher: notify_buffer::Watcher,
        #[arg(long)]
        buffer: usize,
        #[arg(long)]
        files: u64,
        #[arg(long)]
        mount_point: PathBuf,
        #[arg(long, requires = "watcher_cpu")]
        creator_cpu: Option<usize>,
        #[arg(long, requires = "creator_cpu")]
        watcher_cpu: Option<usize>,
    },
    /// CPU-bound work of known complexity (the sweep's known workloads).
    Burn {
        #[arg(value_enum)]
        model: crate::burn::BurnModel,
        n: u64,
        /// Multiplies the work (not the memory).
        #[arg(long, default_value_t = 1)]
        scale: u64,
    },
    /// notify-buffer: a fanotify permission watcher answering every open.
    NotifyWatcher {
        #[arg(long)]
        buffer: usize,
        #[arg(long)]
        mount_point: PathBuf,
        #[arg(long)]
        cpu: Option<usize>,
    },
    /// log-probe: find a log name in a directory and create it.
    LogWriter {
        #[arg(long, value_enum)]
        naming: log_probe::Naming,
        #[arg(long)]
        dir: PathBuf,
    },
    #[command(flatten)]
    TeardownLock(teardown_lock::Child),
    #[command(flatten)]
    WorkingSetCap(working_set_cap::Child),
}

/// Runs a child program; the error is one line for stderr.
pub fn run(child: LabChild) -> Result<(), LabError> {
    match child {
        LabChild::Topdown { placement, n } => topdown_alloc::child_main(placement, n),
        LabChild::LogLauncher { naming, n, dir } => log_probe::launcher_main(naming, n, &dir),
        LabChild::LogWriter { naming, dir } => log_probe::writer_main(naming, &dir),
        LabChild::Notify {
            watcher,
            buffer,
            files,
            mount_point,
            creator_cpu,
            watcher_cpu,
        } => notify_buffer::child_main(
            watcher,
            buffer,
            files,
            &mount_point,
            creator_cpu.zip(watcher_cpu),
        ),
        LabChild::NotifyWatcher {
            buffer,
            mount_point,
            cpu,
        } => notify_buffer::watcher_main(buffer, &mount_point, cpu),
        LabChild::Burn { model, n, scale } => {
            std::hint::black_box(crate::burn::burn(model, n, scale));
            Ok(())
        }
        LabChild::TeardownLock(child) => teardown_lock::child_main(child),
        LabChild::WorkingSetCap(child) => working_set_cap::child_main(child),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(subcommand)]
        child: LabChild,
    }

    /// Every argument list a scenario builds must parse.
    pub fn parses(args: &[String]) -> bool {
        let mut argv = vec!["__child".to_string()];
        argv.extend(args.iter().cloned());
        Wrapper::try_parse_from(argv).is_ok()
    }

    #[test]
    fn scenario_argument_lists_parse() {
        use topdown_alloc::Placement::*;
        for p in [Probe, Cursor, Kernel] {
            assert!(parses(&topdown_alloc::child_args(p, "100")));
        }
        let dir = std::path::Path::new("/tmp/x");
        for w in [
            notify_buffer::Watcher::None,
            notify_buffer::Watcher::FanotifyPerm,
        ] {
            assert!(parses(&notify_buffer::child_args(w, 4096, 10, dir, None)));
            assert!(parses(&notify_buffer::child_args(
                w,
                4096,
                10,
                dir,
                Some((0, 1))
            )));
        }
        assert!(parses(&notify_buffer::watcher_args(4096, dir, None)));
        assert!(parses(&notify_buffer::watcher_args(4096, dir, Some(1))));
        for naming in [log_probe::Naming::Probe, log_probe::Naming::Unique] {
            assert!(parses(&log_probe::launcher_args(naming, "100", dir)));
            assert!(parses(&log_probe::writer_args(naming, dir)));
        }
        assert!(parses(&teardown_lock::holder_args(
            1,
            teardown_lock::Kind::Netns
        )));
        assert!(parses(&teardown_lock::holder_args(
            1,
            teardown_lock::Kind::Plain
        )));
        for memory in [working_set_cap::Memory::File, working_set_cap::Memory::Anon] {
            for pageout in [false, true] {
                assert!(parses(&working_set_cap::scan_args(
                    memory,
                    Some(dir),
                    0.3,
                    pageout
                )));
            }
        }
    }
}
