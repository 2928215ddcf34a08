//! How the slowlab binaries print an error: one line, `slowlab: error: `
//! and the error's causes, each said once. Shared by `slowlab` and
//! `slowlab-fleet-query` (included by path: the package has no library).

/// The error and its causes joined in one line, each cause said once (an
/// error that already quotes its source does not repeat it).
pub fn one_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn a_cause_already_quoted_is_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory");
        #[derive(Debug)]
        struct Open(std::io::Error);
        impl std::fmt::Display for Open {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "cannot open /x: {}", self.0)
            }
        }
        impl std::error::Error for Open {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let err = anyhow::Error::new(Open(io)).context("cannot analyze /x");
        assert_eq!(
            one_line(&err),
            "cannot analyze /x: cannot open /x: No such file or directory"
        );
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(one_line(&plain), "outer: inner");
    }
}
