//! Code without symbols, named by its binary. A frame the symbolizer could
//! not name (`[unknown]`) in a user-space binary (a stripped library, or
//! one that names only its exported functions) is shown as
//! "liblzma.so.5.4.1 (no symbols)" by every view, finding and report, so
//! that none of them names the next function that has a name instead. And
//! when the hottest code of a trace is such code, one warning says so,
//! with the symbolizer's words for why and what to install (the binary's
//! `symbol_error`: "install liblzma5-dbgsym, or set DEBUGINFOD_URLS").
//!
//! Frames without a name outside any binary (anonymous or JIT memory, the
//! vdso, the kernel) keep `[unknown]`: there is no binary to name. Pure:
//! reads the trace.

use std::borrow::Cow;
use std::collections::HashMap;

use slowlab_model::trace::{FrameIdx, FuncIdx, ModuleKind, StackIdx, StrIdx, Trace};

use crate::select::{BuildFx, Selection};

/// The name the symbolizer gives a frame it could not name.
pub const UNKNOWN: &str = "[unknown]";

/// What follows a binary's name for its code without symbols.
pub const NO_SYMBOLS: &str = " (no symbols)";

/// The binary (its short name) of `func` when `func` is code without a
/// symbol in a user-space binary.
pub fn unnamed_binary(trace: &Trace, func: FuncIdx) -> Option<&str> {
    let f = trace.functions.get(func.ix())?;
    if f.kernel || trace.str(f.name) != UNKNOWN {
        return None;
    }
    let m = trace.modules.get(f.module.ix())?;
    let name = trace.str(m.name);
    (m.kind == ModuleKind::User && !name.is_empty()).then_some(name)
}

/// The name to show for `func`: its own, or "BINARY (no symbols)" for code
/// without a symbol in a binary.
pub fn label(trace: &Trace, func: FuncIdx) -> Cow<'_, str> {
    match unnamed_binary(trace, func) {
        Some(binary) => Cow::Owned(format!("{binary}{NO_SYMBOLS}")),
        None => Cow::Borrowed(trace.function_name(func)),
    }
}

/// A label in parentheses: "(liblzma.so.5, no symbols)" rather than two
/// pairs.
pub fn in_parens(label: &str) -> String {
    match label.strip_suffix(NO_SYMBOLS) {
        Some(binary) => format!("({binary}, no symbols)"),
        None => format!("({label})"),
    }
}

/// The labels of a stack's frames, innermost first ([`label`]); a run of
/// frames without symbols in one binary is one entry (frame by frame it
/// tells nothing more).
pub fn stack_labels(trace: &Trace, stack: Option<StackIdx>) -> Vec<String> {
    frame_labels(trace, trace.stack_frames(stack))
}

/// The labels of `frames` as [`stack_labels`] gives them.
pub fn frame_labels(trace: &Trace, frames: impl Iterator<Item = FrameIdx>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut last_unnamed: Option<&str> = None;
    for f in frames {
        let func = trace.frame_function(f);
        let unnamed = unnamed_binary(trace, func);
        if unnamed.is_some() && unnamed == last_unnamed {
            continue;
        }
        last_unnamed = unnamed;
        out.push(label(trace, func).into_owned());
    }
    out
}

/// For the binaries whose code without symbols a finding names (in its
/// `title` or `stack`, as "BINARY (no symbols)"), why they have none and
/// what to do, in the symbolizer's words: "liblzma.so.5: only its
/// exported functions have symbols (.dynsym), and no debug file found
/// (install liblzma5-dbgsym, or set DEBUGINFOD_URLS)"; `None` when it
/// names none that the symbolizer gave a reason for.
pub fn why_no_symbols(trace: &Trace, title: &str, stack: &[String]) -> Option<String> {
    let mut out: Vec<String> = Vec::new();
    for m in &trace.modules {
        let Some(error) = &m.symbol_error else {
            continue;
        };
        let name = trace.str(m.name);
        let label = format!("{name}{NO_SYMBOLS}");
        let named =
            stack.contains(&label) || title.contains(&label) || title.contains(&in_parens(&label));
        let text = format!("{name}: {}", reason(trace, m.path, error));
        if named && m.kind == ModuleKind::User && !out.contains(&text) {
            out.push(text);
        }
    }
    (!out.is_empty()).then(|| out.join("; "))
}

/// A module's `symbol_error` without the path it starts with.
fn reason<'e>(trace: &Trace, path: StrIdx, error: &'e str) -> &'e str {
    error
        .strip_prefix(trace.str(path))
        .and_then(|e| e.strip_prefix(": "))
        .unwrap_or(error)
}

/// [`hottest_code_warning`] among the samples `sel` keeps: its threads,
/// in its time range (what `analyze`, `diagnose` and the page show).
pub fn hottest_code_warning_in(trace: &Trace, sel: &Selection) -> Option<String> {
    let mask = sel.thread_mask(trace);
    let (from_ns, to_ns) = sel.time_range_ns(trace);
    hottest_code_warning(trace, &|i| {
        let t = trace.samples.time_ns[i];
        let thread = trace.samples.thread[i].ix();
        t >= from_ns && t < to_ns && mask.get(thread).copied().unwrap_or(false)
    })
}

/// The warning for a trace whose hottest code has no symbols: the
/// function with the most samples of its own (innermost frame; the idle
/// task left out) among the samples `keep` accepts (by index), when that
/// is code without a symbol in a binary. Its share is of all those samples,
/// as the CPU views count. Names the share, the processes
/// it was sampled in, the binary and why it has no symbols, with what to
/// do (its `symbol_error`, from the symbolizer).
pub fn hottest_code_warning(trace: &Trace, keep: &dyn Fn(usize) -> bool) -> Option<String> {
    let s = &trace.samples;
    let mut leaf: HashMap<Option<StackIdx>, Option<FuncIdx>, BuildFx> = HashMap::default();
    let mut counts: HashMap<FuncIdx, u64, BuildFx> = HashMap::default();
    let mut total = 0u64;
    for i in 0..s.len() {
        if !keep(i) {
            continue;
        }
        // A share of all the samples, as the CPU views give it.
        total += 1;
        if trace.thread_process(s.thread[i]).pid == 0 {
            continue;
        }
        let stack = s.stack[i];
        let func = *leaf
            .entry(stack)
            .or_insert_with(|| Some(trace.frame_function(trace.stack_frames(stack).next()?)));
        if let Some(f) = func {
            *counts.entry(f).or_default() += 1;
        }
    }
    let (&top, &n) = counts
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0 .0.cmp(&a.0 .0)))?;
    let binary = unnamed_binary(trace, top)?;
    // The processes it was sampled in, most first.
    let mut by_comm: HashMap<&str, u64> = HashMap::new();
    for i in (0..s.len()).filter(|&i| keep(i)) {
        if leaf.get(&s.stack[i]).copied().flatten() == Some(top) {
            let comm = trace.str(trace.thread_process(s.thread[i]).comm);
            *by_comm.entry(comm).or_default() += 1;
        }
    }
    let mut comms: Vec<(&str, u64)> = by_comm.into_iter().collect();
    comms.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut names: Vec<&str> = comms.iter().take(3).map(|c| c.0).collect();
    if comms.len() > 3 {
        names.push("…");
    }
    let m = &trace.modules[trace.functions[top.ix()].module.ix()];
    let why = match &m.symbol_error {
        Some(e) => reason(trace, m.path, e),
        None => "no symbols cover that code",
    };
    Some(format!(
        "the hottest code, {:.0}% of the samples (in {}), is in {binary}{NO_SYMBOLS}: {why}",
        100.0 * n as f64 / total.max(1) as f64,
        names.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TraceBuilder;

    /// `xz` with most of its samples in liblzma's code without symbols,
    /// some of them in a page fault, a few in its own `main`.
    fn xz() -> Trace {
        let mut b = TraceBuilder::default();
        let xz = b.process(30, "xz");
        let lzma = b.mixed_stack(
            &[
                "main",
                "[unknown] in liblzma.so.5",
                "[unknown] in liblzma.so.5",
            ],
            &[],
        );
        let fault = b.mixed_stack(
            &["main", "[unknown] in liblzma.so.5"],
            &["asm_exc_page_fault", "exc_page_fault"],
        );
        let own = b.mixed_stack(&["main"], &[]);
        let mut t = 0;
        for (stack, n) in [(lzma, 90), (fault, 8), (own, 2)] {
            for _ in 0..n {
                t += 1_000_000;
                b.sample(t, xz, 0, stack);
            }
        }
        b.symbol_error(
            "liblzma.so.5",
            "liblzma.so.5: only its exported functions have symbols (.dynsym), and no \
             debug file found (install liblzma5-dbgsym, or set DEBUGINFOD_URLS)",
        );
        b.build()
    }

    #[test]
    fn code_without_symbols_is_named_by_its_binary() {
        let t = xz();
        let unnamed = t
            .functions
            .iter()
            .position(|f| t.str(f.name) == UNKNOWN && !f.kernel)
            .map(|i| FuncIdx(i as u32))
            .unwrap();
        assert_eq!(label(&t, unnamed), "liblzma.so.5 (no symbols)");
        assert_eq!(in_parens(&label(&t, unnamed)), "(liblzma.so.5, no symbols)");
        assert_eq!(in_parens("crunch"), "(crunch)");
        let stack = t.samples.stack[0];
        // The run of two frames is one entry.
        assert_eq!(
            stack_labels(&t, stack),
            ["liblzma.so.5 (no symbols)", "main"]
        );
    }

    #[test]
    fn the_warning_names_the_binary_and_what_to_install() {
        let t = xz();
        let w = hottest_code_warning(&t, &|_| true).expect("a warning");
        assert_eq!(
            w,
            "the hottest code, 90% of the samples (in xz), is in liblzma.so.5 (no symbols): only \
             its exported functions have symbols (.dynsym), and no debug file found (install \
             liblzma5-dbgsym, or set DEBUGINFOD_URLS)"
        );
        // The samples in `main` alone: named code, no warning.
        assert_eq!(hottest_code_warning(&t, &|i| i >= 98), None);
    }

    #[test]
    fn a_finding_that_names_code_without_symbols_says_why() {
        let t = xz();
        let why = "liblzma.so.5: only its exported functions have symbols (.dynsym), and no \
                   debug file found (install liblzma5-dbgsym, or set DEBUGINFOD_URLS)";
        let stack = stack_labels(&t, t.samples.stack[0]);
        assert_eq!(
            why_no_symbols(&t, "xz is slow", &stack).as_deref(),
            Some(why)
        );
        let title = "the holder xz [30] was on a CPU (liblzma.so.5, no symbols)";
        assert_eq!(why_no_symbols(&t, title, &[]).as_deref(), Some(why));
        assert_eq!(why_no_symbols(&t, "xz is slow", &["main".into()]), None);
    }
}
