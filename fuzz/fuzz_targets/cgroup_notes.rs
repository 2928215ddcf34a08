//! Fuzz target: bytes → `CgroupInfo::from_json`, the reader of the
//! `FILE.cgroups.json` side file (the memory-cgroup notes).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = slowlab_model::bundle::CgroupInfo::from_json(data);
    });
}
