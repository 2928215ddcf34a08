//! libbpf's messages and errors at load time: [`libbpf_print`] keeps the last lines libbpf
//! printed, and [`load_error`] turns a libbpf error into a [`BpfError`] that says what to
//! do, with those lines. It loads nothing itself.

use std::collections::VecDeque;
use std::sync::Mutex;

use libbpf_rs::{ErrorKind, PrintLevel};

use crate::error::BpfError;
use crate::sys;

/// The last lines libbpf printed, for error messages.
static LIBBPF_LOG: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());
const LIBBPF_LOG_LINES: usize = 40;

pub(crate) fn libbpf_print(_level: PrintLevel, message: String) {
    if let Ok(mut log) = LIBBPF_LOG.lock() {
        for line in message.lines() {
            if log.len() == LIBBPF_LOG_LINES {
                log.pop_front();
            }
            log.push_back(line.to_string());
        }
    }
}

pub(crate) fn take_libbpf_log() -> String {
    match LIBBPF_LOG.lock() {
        Ok(mut log) => log.drain(..).collect::<Vec<_>>().join("\n"),
        Err(_) => String::new(),
    }
}

/// Turns a libbpf error at open/load time into an error that says what to do.
pub(crate) fn load_error(e: libbpf_rs::Error, ring_bytes: u32) -> BpfError {
    let message = format!("{e:#}");
    let log = take_libbpf_log();
    match e.kind() {
        // EACCES from a program's load: the verifier refused it (its reason is in the
        // log), which no privilege or limit changes. Only EPERM is about those.
        ErrorKind::PermissionDenied if message.contains("os error 13") => BpfError::Load {
            message: format!(
                "{message}: the kernel's BPF verifier refused a program (this kernel's \
                 verifier and slowlab's programs disagree); record with `--backend perf` \
                 (and `--no-paths`) here, and report it with the lines below"
            ),
            log,
        },
        ErrorKind::PermissionDenied => {
            let limit = sys::raise_memlock(0);
            let needed = u64::from(ring_bytes) + (1 << 20);
            if limit != libc::RLIM_INFINITY && limit < needed && log.contains("map") {
                BpfError::Memlock { limit, needed }
            } else {
                BpfError::NotPermitted {
                    detail: format!("the kernel refused: {message}"),
                }
            }
        }
        ErrorKind::Unsupported => BpfError::Unsupported {
            reason: format!(
                "{message} (the kernel needs CONFIG_BPF_SYSCALL=y; the BPF ring buffer needs \
                 Linux 5.8 or later)"
            ),
        },
        _ if message.contains("os error 22")
            && log.contains("events")
            && !log.contains("stacks") =>
        {
            BpfError::Unsupported {
                reason: format!(
                    "{message}: the kernel refused the BPF ring buffer map (it needs Linux 5.8 or \
                 later)"
                ),
            }
        }
        _ => BpfError::Load { message, log },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_the_verifier_refuses_is_not_called_a_privilege_or_memlock_problem() {
        // EACCES: what BPF_PROG_LOAD returns when the verifier rejects a program.
        let refused = load_error(libbpf_rs::Error::from_raw_os_error(libc::EACCES), 1 << 30);
        assert!(
            matches!(&refused, BpfError::Load { message, .. } if message.contains("verifier")),
            "{refused:?}"
        );
        // EPERM: no privilege (or, before 5.11, a locked-memory limit too low).
        let denied = load_error(libbpf_rs::Error::from_raw_os_error(libc::EPERM), 1 << 30);
        assert!(
            matches!(
                denied,
                BpfError::NotPermitted { .. } | BpfError::Memlock { .. }
            ),
            "{denied:?}"
        );
    }
}
