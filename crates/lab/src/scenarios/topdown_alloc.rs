//! topdown-alloc: top-down placement that searches from a fixed high address
//! for every allocation makes n allocations cost O(n²).
//!
//! The Windows original: VirtualAlloc with MEM_TOP_DOWN scans the reserved
//! list for the highest hole each time. The Linux kernel's own placement is
//! a tree search and stays linear, so the mechanism is reproduced in user
//! space, as an allocator with a top-down policy would do it: for each 64 KiB
//! block try `MAP_FIXED_NOREPLACE` at a fixed high address and step down
//! 64 KiB on `EEXIST`. Control: the same placement remembering where it
//! stopped, and the kernel's own placement. Neighbouring blocks alternate
//! protections so that they stay separate mappings, as separate VirtualAlloc
//! reservations are.
//!
//! The child (`__child topdown`) times only its allocation loop and frees
//! everything before it exits.
//!
//! What it does not do: touch any memory but the child's own mappings.

use serde_json::json;
use slowlab_model::results::{Headline, Role, ScenarioResult, ScenarioStatus, SweepResult};

use crate::measure::{
    emit_report, process_cpu_seconds, run_child, sweep_to_variant, sweep_variant, VariantSweep,
};
use crate::runner::Scenario;
use crate::verdicts::{exponent_text, sweep_affected};
use crate::{system, LabContext, LabError, Profile};

pub struct TopdownAlloc;

/// Size of one allocation, as in the original test program.
pub const BLOCK: usize = 64 * 1024;
/// Where the top-down search starts: well above the heap and below the
/// kernel's mmap area on a 47-bit (x86-64) or 48-bit (arm64) address space.
const TOP_ADDRESS: usize = 0x6000_0000_0000;

/// How the child places its blocks.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Search down from the top address for every block: O(n²).
    Probe,
    /// Search down from where the previous search stopped: O(n).
    Cursor,
    /// Let the kernel choose (mmap without an address).
    Kernel,
}

impl Placement {
    fn arg(self) -> &'static str {
        match self {
            Placement::Probe => "probe",
            Placement::Cursor => "cursor",
            Placement::Kernel => "kernel",
        }
    }
}

impl Scenario for TopdownAlloc {
    fn id(&self) -> &'static str {
        "topdown-alloc"
    }

    fn summary(&self) -> &'static str {
        "top-down placement that searches from the top for every block: n allocations cost O(n²)"
    }

    fn needs_root(&self) -> bool {
        false
    }

    fn detector(&self) -> &'static str {
        "topdown-probe"
    }

    fn run_for_trace(&self, ctx: &mut LabContext, role: Role) -> Result<(), LabError> {
        let placement = match role {
            Role::Pathological => Placement::Probe,
            Role::Control => Placement::Cursor,
        };
        let n = ctx.profile.pick(250, 400, 1000).to_string();
        run_child(ctx, &child_args(placement, &n)).map(|_| ())
    }

    fn preflight(&self, ctx: &LabContext) -> Result<(), LabError> {
        let largest = *sizes(ctx.profile).last().unwrap_or(&0);
        let limit = system::max_map_count().unwrap_or(65530);
        let needed = largest + system::own_map_count() as u64 + 100;
        if needed > limit {
            return Err(LabError::Unsuitable(format!(
                "vm.max_map_count is {limit}, too low for {largest} separate mappings; \
                 raise it with `sysctl vm.max_map_count={}` or use --quick",
                needed.next_power_of_two()
            )));
        }
        Ok(())
    }

    fn run(&self, ctx: &mut LabContext) -> Result<ScenarioResult, LabError> {
        let sizes = sizes(ctx.profile);
        let reps = ctx.profile.pick(2, 3, 3);
        let budget_s = ctx.profile.pick(20.0, 60.0, 240.0);
        let early_stop = ctx.profile != Profile::Full;

        let mut swept = Vec::new();
        for (placement, name, role) in [
            (Placement::Probe, "topdown-probe", Role::Pathological),
            (Placement::Cursor, "topdown-cursor", Role::Control),
            (Placement::Kernel, "kernel-placement", Role::Control),
        ] {
            ctx.check_cancel()?;
            let spec = VariantSweep {
                name,
                role,
                child_args: child_args(placement, "{n}"),
                sizes: sizes.clone(),
                reps,
                budget_s,
                // The controls are cheap: always measure every size.
                early_stop: early_stop && role == Role::Pathological,
            };
            let (result, _) = sweep_variant(ctx, &spec)?;
            let label = match placement {
                Placement::Probe => "Topdown",
                Placement::Cursor => "Cursor ",
                Placement::Kernel => "Kernel ",
            };
            for row in &result.rows {
                ctx.line(original_line(label, row.median_cpu_s, row.n));
            }
            for warning in &result.warnings {
                ctx.line(format!("  ({name}: {warning})"));
            }
            swept.push((name, role, result));
        }
        Ok(judge(&swept))
    }
}

pub fn sizes(profile: Profile) -> Vec<u64> {
    match profile {
        Profile::Tiny => vec![250, 500, 1000, 2000],
        Profile::Quick => vec![500, 1000, 2000, 4000],
        Profile::Full => vec![1000, 2000, 4000, 8000, 16000, 32000, 64000],
    }
}

/// The child's arguments; `n` may be `{n}` for a sweep.
pub fn child_args(placement: Placement, n: &str) -> Vec<String> {
    vec![
        "topdown".into(),
        "--placement".into(),
        placement.arg().into(),
        "--n".into(),
        n.into(),
    ]
}

/// The line of the original test program:
/// `Topdown allocs took  8.8800 s for  8000 allocs of 64 KB blocks (total is 500 MB).`
pub fn original_line(label: &str, seconds: f64, n: u64) -> String {
    let kb = BLOCK as u64 / 1024;
    format!(
        "{label} allocs took {seconds:7.4} s for {n:5} allocs of {kb} KB blocks (total is {} MB).",
        n * kb / 1024
    )
}

/// Verdict: affected when the probing placement grows super-linearly while
/// the cursor control does not. Headline: CPU time at the largest size both
/// measured.
fn judge(swept: &[(&str, Role, SweepResult)]) -> ScenarioResult {
    let probe = &swept[0].2;
    let cursor = &swept[1].2;
    let common = probe
        .rows
        .iter()
        .rev()
        .find_map(|p| cursor.rows.iter().find(|c| c.n == p.n).map(|c| (p, c)));
    let headline = common.map(|(p, c)| Headline {
        metric: format!("CPU time for n={} allocations", p.n),
        unit: "s".into(),
        pathological: p.median_cpu_s,
        control: c.median_cpu_s,
        ratio: p.median_cpu_s / c.median_cpu_s.max(1e-9),
    });
    let explanation = format!(
        "searching from the top for every block grows as {} ({}), remembering the position as {} ({}), the kernel's placement as {} ({})",
        exponent_text(probe),
        probe.verdict.as_str(),
        exponent_text(cursor),
        cursor.verdict.as_str(),
        exponent_text(&swept[2].2),
        swept[2].2.verdict.as_str(),
    );
    ScenarioResult {
        id: "topdown-alloc".into(),
        status: ScenarioStatus::Ran,
        reason: None,
        affected: sweep_affected(probe.verdict, &[cursor.verdict]),
        headline,
        variants: swept
            .iter()
            .map(|(name, role, r)| sweep_to_variant(name, *role, r))
            .collect(),
        explanation,
        lines: Vec::new(),
        platform: "linux".into(),
    }
}

/// The child program: places `n` blocks, times the placement, frees them.
pub fn child_main(placement: Placement, n: u64) -> Result<(), LabError> {
    let start_cpu = process_cpu_seconds();
    let start = std::time::Instant::now();
    let mut blocks: Vec<usize> = Vec::with_capacity(n as usize);
    let mut failed_attempts: u64 = 0;
    let mut cursor = TOP_ADDRESS;
    let outcome = (|| {
        for i in 0..n {
            let prot = if i % 2 == 0 {
                libc::PROT_READ
            } else {
                libc::PROT_READ | libc::PROT_WRITE
            };
            let address = match placement {
                Placement::Kernel => map_anywhere(prot)?,
                Placement::Probe | Placement::Cursor => {
                    let start_at = if placement == Placement::Probe {
                        TOP_ADDRESS
                    } else {
                        cursor
                    };
                    let (address, failures) = map_top_down(start_at, prot)?;
                    failed_attempts += failures;
                    cursor = address - BLOCK;
                    address
                }
            };
            blocks.push(address);
        }
        Ok::<(), LabError>(())
    })();
    let cpu_s = process_cpu_seconds() - start_cpu;
    let wall_s = start.elapsed().as_secs_f64();
    for &address in &blocks {
        // SAFETY: each address is a BLOCK-sized mapping this process made.
        unsafe {
            libc::munmap(address as *mut libc::c_void, BLOCK);
        }
    }
    outcome?;
    emit_report(&json!({
        "cpu_s": cpu_s,
        "wall_s": wall_s,
        "n": n,
        "failed_attempts": failed_attempts,
    }));
    Ok(())
}

/// Tries `MAP_FIXED_NOREPLACE` from `start` downwards in BLOCK steps until
/// a free spot is found; returns it and the number of failed attempts.
fn map_top_down(start: usize, prot: i32) -> Result<(usize, u64), LabError> {
    let mut address = start;
    let mut failures = 0;
    loop {
        // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping; the
        // result is checked below.
        let p = unsafe {
            libc::mmap(
                address as *mut libc::c_void,
                BLOCK,
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EEXIST) && address > BLOCK {
                address -= BLOCK;
                failures += 1;
                continue;
            }
            return Err(LabError::io(format!("mmap at {address:#x} failed"), err));
        }
        if p as usize != address {
            // SAFETY: p is the mapping the kernel just made.
            unsafe { libc::munmap(p, BLOCK) };
            return Err(LabError::Failed(
                "this kernel ignores MAP_FIXED_NOREPLACE (Linux 4.17 or later is needed)".into(),
            ));
        }
        return Ok((address, failures));
    }
}

fn map_anywhere(prot: i32) -> Result<usize, LabError> {
    // SAFETY: a fresh anonymous mapping at an address the kernel chooses.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            BLOCK,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(LabError::last_os("mmap failed"));
    }
    Ok(p as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::sweep_result as result;
    use slowlab_model::results::Verdict;

    #[test]
    fn the_line_matches_the_original_program() {
        assert_eq!(
            original_line("Topdown", 8.88, 8000),
            "Topdown allocs took  8.8800 s for  8000 allocs of 64 KB blocks (total is 500 MB)."
        );
    }

    #[test]
    fn affected_when_probing_is_superlinear_and_the_cursor_is_not() {
        let probe = result(Verdict::Superlinear, 2.0, &[(1000, 0.15), (2000, 0.6)]);
        let cursor = result(
            Verdict::Linear,
            1.0,
            &[(1000, 0.001), (2000, 0.002), (4000, 0.004)],
        );
        let kernel = cursor.clone();
        let r = judge(&[
            ("topdown-probe", Role::Pathological, probe),
            ("topdown-cursor", Role::Control, cursor),
            ("kernel-placement", Role::Control, kernel),
        ]);
        assert_eq!(r.affected, Some(true));
        let h = r.headline.unwrap();
        // The largest size both measured.
        assert!(h.metric.contains("n=2000"), "{}", h.metric);
        assert!((h.ratio - 300.0).abs() < 1e-6);
        assert_eq!(r.variants.len(), 3);
    }

    #[test]
    fn not_affected_when_both_are_linear() {
        let lin = result(Verdict::Linear, 1.0, &[(1000, 0.001), (2000, 0.002)]);
        let r = judge(&[
            ("topdown-probe", Role::Pathological, lin.clone()),
            ("topdown-cursor", Role::Control, lin.clone()),
            ("kernel-placement", Role::Control, lin),
        ]);
        assert_eq!(r.affected, Some(false));
    }

    #[test]
    fn child_arguments_name_the_placement() {
        assert_eq!(
            child_args(Placement::Cursor, "{n}"),
            vec!["topdown", "--placement", "cursor", "--n", "{n}"]
        );
    }
}
