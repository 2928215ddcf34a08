//! The syscall table against this kernel's tracefs: for every table syscall whose
//! `sys_enter_*` tracepoint exists, the arguments the table calls paths must be `char *`
//! fields at offset 16 + 8 × index, and `__syscall_nr` must sit at offset 8 (the layout
//! `paths.bpf.c` assumes). Prints `SKIP:` when tracefs cannot be read.

use std::fs;
use std::path::Path;

use slowlab_bpf::Syscall;

/// (type and name, offset) of each `field:` line of a tracepoint format file.
fn fields(format: &str) -> Vec<(String, usize)> {
    format
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let decl = l
                .strip_prefix("field:")?
                .split(';')
                .next()?
                .trim()
                .to_string();
            let offset = l
                .split("offset:")
                .nth(1)?
                .split(';')
                .next()?
                .trim()
                .parse()
                .ok()?;
            Some((decl, offset))
        })
        .collect()
}

#[test]
fn path_arguments_match_the_kernels_tracepoint_formats() {
    let root = ["/sys/kernel/debug/tracing", "/sys/kernel/tracing"]
        .into_iter()
        .map(|r| Path::new(r).join("events/syscalls"))
        .find(|p| fs::read_dir(p).is_ok());
    let Some(dir) = root else {
        slowlab_testkit::skip(format_args!(
            "tracepoint formats: cannot read tracefs events/syscalls (run as root)"
        ));
        return;
    };
    let mut checked = 0;
    for s in Syscall::ALL {
        let Ok(format) = fs::read_to_string(dir.join(s.tracepoint().to_string()).join("format"))
        else {
            continue;
        };
        let fields = fields(&format);
        assert!(
            fields
                .iter()
                .any(|(d, o)| d.ends_with("__syscall_nr") && *o == 8),
            "{s}: __syscall_nr not at offset 8"
        );
        for &arg in s.path_args() {
            let offset = 16 + 8 * usize::from(arg);
            let field = fields.iter().find(|(_, o)| *o == offset);
            assert!(
                field.is_some_and(|(d, _)| d.contains("char *")),
                "{s}: argument {arg} (offset {offset}) is {field:?}, not a path"
            );
        }
        checked += 1;
    }
    assert!(
        checked >= 10,
        "only {checked} syscalls found in {}",
        dir.display()
    );
    eprintln!(
        "tracepoint formats: {checked} syscalls checked in {}",
        dir.display()
    );
}

#[test]
fn names_parse_as_perf_writes_them() {
    assert_eq!(Syscall::from_name("openat"), Some(Syscall::Openat));
    assert_eq!(
        Syscall::from_name("sys_enter_newfstatat"),
        Some(Syscall::Newfstatat)
    );
    assert_eq!(
        Syscall::from_name("syscalls:sys_enter_statx"),
        Some(Syscall::Statx)
    );
    assert_eq!(
        Syscall::from_name("syscalls:sys_exit_unlinkat"),
        Some(Syscall::Unlinkat)
    );
    assert_eq!(Syscall::from_name("read"), None);
    for s in Syscall::ALL {
        assert_eq!(Syscall::from_id(s.id()), Some(*s));
        assert!(s.id() < 64, "{s}: ids must fit the attached mask");
        assert_eq!(Syscall::from_name(&s.tracepoint().to_string()), Some(*s));
    }
}
