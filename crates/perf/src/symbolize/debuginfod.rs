//! Debug files by build id from debuginfod servers (the protocol of
//! elfutils' debuginfod, which Debian, Ubuntu, Fedora and Arch run):
//! `GET URL/buildid/ID/debuginfo` for a stripped binary's separate debug
//! file, `GET URL/buildid/ID/executable` for a binary that is gone. Asked
//! only when nothing local has the symbols, servers in the order given,
//! the first answer kept.
//!
//! A fetched file is kept under the symbol cache's directory,
//! `DIR/debuginfod/ID/debuginfo` (or `executable`), as elfutils' client
//! keeps them, so it is fetched once; a build id no server knows is not
//! asked again for [`MISS_TTL`] (`ID/debuginfo.miss`). With the cache off
//! the file goes to the temporary directory and is unlinked once mapped.
//! Each fetch adds one line to the notes ([`Fetcher::notes`]); a download
//! whose announced size is over [`ANNOUNCE`] says so on stderr first, as
//! it may take a while.
//!
//! It decides nothing about when to ask (`binaries` does).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// Where and whether to fetch debug files by build id.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DebuginfodOptions {
    /// The servers' base URLs (`DEBUGINFOD_URLS`, space-separated), asked
    /// in this order; none: nothing is fetched.
    pub urls: Vec<String>,
    /// Never ask a server (`--offline`); files fetched before are used.
    pub offline: bool,
    /// Time-out for connecting and for the answer's headers, per server
    /// (`DEBUGINFOD_TIMEOUT`); `None`: [`DEFAULT_TIMEOUT`].
    pub timeout: Option<Duration>,
}

/// The default time-out to connect and get an answer: the download itself
/// may take longer (bounded by [`MAX_TIME`]).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// No download takes longer than this.
const MAX_TIME: Duration = Duration::from_secs(600);
/// A build id that no server had is not asked again for this long (what
/// elfutils' client does, `cache_miss_s`).
const MISS_TTL: Duration = Duration::from_secs(600);
/// Downloads announced bigger than this print a line first.
const ANNOUNCE: u64 = 16 << 20;

/// What to fetch.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Artifact {
    DebugInfo,
    Executable,
}

impl Artifact {
    fn name(self) -> &'static str {
        match self {
            Artifact::DebugInfo => "debuginfo",
            Artifact::Executable => "executable",
        }
    }
}

/// Fetches and keeps debug files; one per symbolization.
pub(super) struct Fetcher {
    opts: DebuginfodOptions,
    /// `DIR/debuginfod`, when the symbol cache is on.
    dir: Option<PathBuf>,
    agent: ureq::Agent,
    notes: Mutex<Vec<String>>,
    /// Servers that could not be reached (or answered with an error) in
    /// this run: not asked again, so a server that is down costs one
    /// time-out and one note, not one per binary.
    failed: Mutex<Vec<String>>,
}

/// Makes temporary file names unique within this process.
static TMP: AtomicU64 = AtomicU64::new(0);

impl Fetcher {
    /// A fetcher with `opts`, keeping files under `cache_dir` (the symbol
    /// cache's directory); `None` when there is no server to ask and no
    /// cache to read files fetched before from.
    pub(super) fn new(opts: &DebuginfodOptions, cache_dir: Option<&Path>) -> Option<Fetcher> {
        // Without servers, files fetched before are still read.
        if opts.urls.is_empty() && cache_dir.is_none() {
            return None;
        }
        let timeout = opts.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(MAX_TIME))
            .timeout_connect(Some(timeout))
            .timeout_recv_response(Some(timeout))
            // A stalled transfer: no byte for this long.
            .timeout_per_read(Some(timeout))
            .user_agent(concat!("slowlab/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Some(Fetcher {
            opts: opts.clone(),
            dir: cache_dir.map(|d| d.join("debuginfod")),
            agent,
            notes: Mutex::new(Vec::new()),
            failed: Mutex::new(Vec::new()),
        })
    }

    /// The notes so far: one line per file fetched.
    pub(super) fn notes(&self) -> Vec<String> {
        self.notes.lock().map(|n| n.clone()).unwrap_or_default()
    }

    /// A file for the binary `what` (its path, for the notes) whose build id
    /// is `build_id`: kept from before, else fetched (unless offline). The
    /// path of a kept file, or of a temporary one the caller maps and
    /// removes (the second value: true when it must be removed).
    pub(super) fn fetch(
        &self,
        build_id: &str,
        artifact: Artifact,
        what: &str,
    ) -> Option<(PathBuf, bool)> {
        if !valid_build_id(build_id) {
            return None;
        }
        let kept = self
            .dir
            .as_ref()
            .map(|d| d.join(build_id).join(artifact.name()));
        if let Some(k) = kept.as_ref().filter(|k| k.is_file()) {
            return Some((k.clone(), false));
        }
        if self.opts.offline || self.opts.urls.is_empty() {
            return None;
        }
        let miss = kept
            .as_ref()
            .map(|k| k.with_file_name(format!("{}.miss", artifact.name())));
        if let Some(m) = &miss {
            let fresh = std::fs::metadata(m)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .is_some_and(|age| age < MISS_TTL);
            if fresh {
                return None;
            }
        }
        let tmp_dir = match &kept {
            Some(k) => k.parent()?.to_path_buf(),
            None => std::env::temp_dir(),
        };
        let mut errors = Vec::new();
        // Some server could not be asked: not a miss.
        let mut unanswered = false;
        for url in &self.opts.urls {
            let base = url.trim_end_matches('/');
            if self
                .failed
                .lock()
                .is_ok_and(|f| f.iter().any(|u| u == base))
            {
                unanswered = true;
                continue;
            }
            if !base.starts_with("http://") {
                // No TLS in this build (a smaller, quicker one to compile).
                if let Ok(mut f) = self.failed.lock() {
                    f.push(base.to_owned());
                }
                unanswered = true;
                errors.push(format!(
                    "{base}: only http:// servers can be asked (this build has no TLS)"
                ));
                continue;
            }
            let full = format!("{base}/buildid/{build_id}/{}", artifact.name());
            match self.download(&full, &tmp_dir, what) {
                Ok(Some((tmp, bytes))) => {
                    let (path, temporary) = match &kept {
                        Some(k) if std::fs::rename(&tmp, k).is_ok() => (k.clone(), false),
                        _ => (tmp, true),
                    };
                    if let Ok(mut n) = self.notes.lock() {
                        n.push(format!(
                            "fetched the {} of {what} (build id {build_id}, {}) from {base}{}",
                            match artifact {
                                Artifact::DebugInfo => "debug file",
                                Artifact::Executable => "executable",
                            },
                            size(bytes),
                            match (&kept, temporary) {
                                (Some(_), false) => format!(
                                    ", kept in {}",
                                    self.dir.as_deref().unwrap_or(Path::new("")).display()
                                ),
                                _ => String::new(),
                            }
                        ));
                    }
                    return Some((path, temporary));
                }
                Ok(None) => {}
                Err(e) => {
                    if let Ok(mut f) = self.failed.lock() {
                        f.push(base.to_owned());
                    }
                    unanswered = true;
                    errors.push(format!("{base}: {e}"));
                }
            }
        }
        if !errors.is_empty() {
            if let Ok(mut n) = self.notes.lock() {
                n.push(format!(
                    "could not fetch the {} of {what} (build id {build_id}): {}",
                    artifact.name(),
                    errors.join("; ")
                ));
            }
        }
        if let Some(m) = miss.as_ref().filter(|_| !unanswered) {
            // Every server answered that it does not have it.
            if let Some(parent) = m.parent() {
                let _ = std::fs::create_dir_all(parent);
            }
            let _ = std::fs::write(m, b"");
        }
        None
    }

    /// Downloads `url` into a new file in `dir`: its path and size, `None`
    /// when the server does not have it (404 and other non-200 answers).
    fn download(
        &self,
        url: &str,
        dir: &Path,
        what: &str,
    ) -> Result<Option<(PathBuf, u64)>, String> {
        let mut resp = self.agent.get(url).call().map_err(|e| e.to_string())?;
        if resp.status() != 200 {
            return Ok(None);
        }
        let body = resp.body_mut();
        if let Some(len) = body.content_length().filter(|&l| l > ANNOUNCE) {
            eprintln!("slowlab: downloading {} for {what} from {url}…", size(len));
        }
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let tmp = dir.join(format!(
            ".slowlab-debuginfod.{}.{}",
            std::process::id(),
            TMP.fetch_add(1, Ordering::Relaxed)
        ));
        let copied = (|| -> std::io::Result<u64> {
            let mut f = std::fs::File::create(&tmp)?;
            let n = std::io::copy(&mut body.with_config().reader(), &mut f)?;
            f.flush()?;
            Ok(n)
        })();
        match copied {
            Ok(n) => Ok(Some((tmp, n))),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e.to_string())
            }
        }
    }
}

/// A build id as perf writes it (lowercase hex), never a path.
fn valid_build_id(id: &str) -> bool {
    (2..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `1.2 MB`, `340 KB`.
fn size(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MB", bytes as f64 / (1u64 << 20) as f64)
    } else {
        format!("{} KB", bytes.div_ceil(1024))
    }
}

/// `DEBUGINFOD_URLS` as elfutils reads it: URLs separated by spaces.
pub fn parse_urls(value: &str) -> Vec<String> {
    value.split_ascii_whitespace().map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_ids_are_hex_only() {
        assert!(valid_build_id("ab12cd"));
        assert!(!valid_build_id("../etc"));
        assert!(!valid_build_id("a"));
    }

    #[test]
    fn urls_split_on_spaces() {
        assert_eq!(
            parse_urls(" http://a:8002  https://b/ "),
            vec!["http://a:8002".to_string(), "https://b/".to_string()]
        );
    }

    #[test]
    fn offline_uses_only_kept_files() {
        let dir = tempfile::tempdir().unwrap();
        let opts = DebuginfodOptions {
            urls: vec!["http://127.0.0.1:9".into()],
            offline: true,
            timeout: Some(Duration::from_millis(200)),
        };
        let f = Fetcher::new(&opts, Some(dir.path())).unwrap();
        assert!(f.fetch("abcd", Artifact::DebugInfo, "x").is_none());
        let kept = dir.path().join("debuginfod/abcd/debuginfo");
        std::fs::create_dir_all(kept.parent().unwrap()).unwrap();
        std::fs::write(&kept, b"x").unwrap();
        assert_eq!(
            f.fetch("abcd", Artifact::DebugInfo, "x"),
            Some((kept, false))
        );
        assert!(f.notes().is_empty());
    }

    #[test]
    fn an_unreachable_server_is_a_note_not_a_wait() {
        let dir = tempfile::tempdir().unwrap();
        let opts = DebuginfodOptions {
            // Port 9 (discard) on loopback: refused at once.
            urls: vec!["http://127.0.0.1:9".into()],
            offline: false,
            timeout: Some(Duration::from_millis(500)),
        };
        let f = Fetcher::new(&opts, Some(dir.path())).unwrap();
        let t = std::time::Instant::now();
        assert!(f.fetch("abcd", Artifact::DebugInfo, "prog").is_none());
        assert!(t.elapsed() < Duration::from_secs(5));
        let notes = f.notes();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("could not fetch the debuginfo of prog"));
    }
}
