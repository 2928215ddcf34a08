//! Fuzz target: bytes → `slowlab_bpf::parse_paths`, the reader of the
//! `FILE.paths` side file (the eBPF path capture).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = slowlab_bpf::parse_paths(data, std::path::Path::new("fuzz.paths"));
    });
}
