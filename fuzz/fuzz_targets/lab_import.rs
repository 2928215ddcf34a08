//! Fuzz target: bytes → what `slowlab import` does with a results file of
//! the Windows probes before rendering: `parse_results` (JSON Lines or a
//! JSON array), then `complete` on each result (the growth statistics and
//! the verdict).

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let Ok(text) = std::str::from_utf8(data) else {
            return;
        };
        if let Ok(mut results) = slowlab_lab::verdicts::parse_results(text) {
            for r in &mut results {
                slowlab_lab::verdicts::complete(r);
            }
        }
    });
}
