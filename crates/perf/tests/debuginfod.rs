//! Symbols from a real debuginfod server: a program built with debug
//! information is split (`objcopy --only-keep-debug`, then `strip`), the
//! stripped binary recorded with perf, and the debug file served by
//! elfutils' `debuginfod -F DIR` on a local port. Reading the trace with
//! the server given names the program's functions, says in one note what
//! was fetched, and keeps the file in the symbol cache: a second read
//! `offline` still names them; offline without the cache it cannot.
//!
//! Needs gcc, objcopy, strip, perf (allowed to record its own child) and
//! debuginfod (Debian package `debuginfod`, from `scripts/setup.sh
//! --tests`); skips otherwise.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use slowlab_model::trace::Trace;
use slowlab_perf::symbolize::DebuginfodOptions;
use slowlab_perf::{read_file, ReadOptions};

fn run(cmd: &mut Command) -> bool {
    let out = cmd.output().expect("spawn");
    if !out.status.success() {
        eprintln!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    out.status.success()
}

/// The server, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The names of the frames of module `module` in every sample's stack.
fn names_in(t: &Trace, module: &str) -> Vec<String> {
    let mut v: Vec<String> = t
        .samples
        .stack
        .iter()
        .flat_map(|&s| t.stack_frames(s).collect::<Vec<_>>())
        .map(|f| t.frame_function(f))
        .filter(|&func| t.function_module(func) == module)
        .map(|func| t.function_name(func).to_string())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The GNU build id of an ELF file, as `readelf -n` prints it.
fn build_id(file: &Path) -> String {
    let out = Command::new("readelf")
        .arg("-n")
        .arg(file)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_owned))
        .expect("a build id")
}

fn read(trace: &Path, cache: Option<PathBuf>, debuginfod: DebuginfodOptions) -> Trace {
    let opts = ReadOptions {
        symbol_cache: cache,
        debuginfod,
        ..ReadOptions::default()
    };
    read_file(trace, &opts, &|_, _, _| {}).expect("read the trace")
}

#[test]
fn a_stripped_programs_functions_are_named_through_a_local_debuginfod() {
    for tool in ["gcc", "objcopy", "strip", "readelf", "perf", "debuginfod"] {
        if !slowlab_testkit::has_tool(tool) {
            slowlab_testkit::skip(format!(
                "{tool} not found (scripts/setup.sh --tests installs it)"
            ));
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hot.c");
    let prog = d.join("prog");
    let serve = d.join("serve");
    std::fs::create_dir(&serve).unwrap();
    let debug = serve.join("prog.debug");
    assert!(run(Command::new("gcc")
        .args([
            "-g",
            // -O0: every function with a frame. At -O1 gcc builds `spin`, a leaf, without
            // one (-mno-omit-leaf-frame-pointer does not change that), so its samples skip
            // `main`, which was then named only from the few samples in `fill`'s memset:
            // none, at times, under load (a CI failure; 5 runs in 20 beside two busy loops).
            "-O0",
            "-fno-omit-frame-pointer",
            "-Wl,--build-id",
            "-o"
        ])
        .arg(&prog)
        .arg(&src)));
    assert!(run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&prog)
        .arg(&debug)));
    assert!(run(Command::new("strip").arg("--strip-all").arg(&prog)));

    // Recorded without perf's build-id cache (which would keep a copy).
    let trace = d.join("t.data");
    if !slowlab_testkit::perf_record(&trace, &prog) {
        return;
    }

    // Without a server: the stripped program's functions have no names.
    let cache = d.join("cache");
    let none = read(&trace, Some(cache.clone()), DebuginfodOptions::default());
    assert!(
        !names_in(&none, "prog").iter().any(|n| n == "spin"),
        "named without debug information? {:?}",
        names_in(&none, "prog")
    );

    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = Server(
        Command::new("debuginfod")
            .arg("-F")
            .arg(&serve)
            .arg("-p")
            .arg(port.to_string())
            .arg("-d")
            .arg(d.join("index.sqlite"))
            .args(["-t", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn debuginfod"),
    );
    let url = format!("http://127.0.0.1:{port}");
    // Until it has indexed the directory and serves the file.
    let id = build_id(&prog);
    let probe = format!("{url}/buildid/{id}/debuginfo");
    let start = Instant::now();
    loop {
        let status = ureq::get(&probe)
            .config()
            .http_status_as_error(false)
            .build()
            .call()
            .map(|r| r.status().as_u16());
        if matches!(status, Ok(200)) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "debuginfod did not serve {probe} within a minute: {status:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let with = DebuginfodOptions {
        urls: vec![url.clone()],
        offline: false,
        timeout: Some(Duration::from_secs(10)),
    };
    let t = read(&trace, Some(cache.clone()), with.clone());
    let names = names_in(&t, "prog");
    assert!(
        // (`fill`'s time is in libc's memset: it may have no frame.)
        names.iter().any(|n| n == "spin") && names.iter().any(|n| n == "main"),
        "{names:?}; warnings {:?}",
        t.stats.warnings
    );
    let notes: Vec<&String> = t
        .stats
        .warnings
        .iter()
        .filter(|w| w.starts_with("symbols: fetched the debug file of"))
        .collect();
    assert_eq!(notes.len(), 1, "{:?}", t.stats.warnings);
    assert!(notes[0].contains(&url), "{}", notes[0]);
    drop(server);

    // Kept: offline (and the server gone), still named, nothing fetched.
    let offline = DebuginfodOptions {
        offline: true,
        ..with.clone()
    };
    let again = read(&trace, Some(cache.clone()), offline.clone());
    assert!(names_in(&again, "prog").iter().any(|n| n == "spin"));
    assert!(
        !again.stats.warnings.iter().any(|w| w.contains("fetch")),
        "{:?}",
        again.stats.warnings
    );
    // No server given at all: what was fetched is still read.
    let kept = read(&trace, Some(cache.clone()), DebuginfodOptions::default());
    assert!(names_in(&kept, "prog").iter().any(|n| n == "spin"));
    // Offline without the cache: nothing to name them with.
    let bare = read(&trace, None, offline);
    assert!(!names_in(&bare, "prog").iter().any(|n| n == "spin"));
}
