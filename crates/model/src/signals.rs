//! Names of Linux signal numbers, as messages and views print them (`SIGTERM`). It does
//! not send or catch signals.

/// The name of a signal number (`SIGTERM`), or `SIG<n>`.
pub fn name(sig: i32) -> String {
    const NAMES: [&str; 16] = [
        "", "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE",
        "SIGKILL", "SIGUSR1", "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM",
    ];
    match usize::try_from(sig).ok().and_then(|i| NAMES.get(i)) {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => format!("SIG{sig}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_the_usual_signals_and_numbers_the_rest() {
        assert_eq!(super::name(11), "SIGSEGV");
        assert_eq!(super::name(15), "SIGTERM");
        assert_eq!(super::name(34), "SIG34");
        assert_eq!(super::name(-1), "SIG-1");
    }
}
