//! Text of the sampled-CPU views of `slowlab analyze`: the default summary
//! (busiest processes, hottest functions), the `--by` tree and the
//! butterfly (`--callers`, `--callees`). Renders computed views; computes
//! nothing.

// Writing to a `String` cannot fail: the `fmt::Result`s are dropped.
use std::fmt::Write;

use slowlab_model::views::butterfly::{BNode, Butterfly};
use slowlab_model::views::cpu::{pct, CpuTree, Key, Node, Summary};

/// The default view: the busiest processes and the hottest functions.
pub fn summary_text(s: &Summary, top: usize) -> String {
    let mut out = String::new();
    let out = &mut out;
    let _ = writeln!(
        out,
        "{} samples of {} over {:.2} s, {} lost",
        s.samples,
        s.sample_event.as_deref().unwrap_or("?"),
        s.duration_s,
        s.lost
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "{:>9} {:>7}  process (pid)", "samples", "%");
    for p in s.processes.iter().take(top.min(15)) {
        let _ = writeln!(
            out,
            "{:>9} {:>6.2}%  {} ({})",
            p.samples,
            pct(p.samples, s.samples),
            p.comm,
            p.pid
        );
    }
    if s.processes.len() > top.min(15) {
        let _ = writeln!(
            out,
            "{:>9}          … {} more",
            "",
            s.processes.len() - top.min(15)
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "{:>7} {:>7}  function [module]", "self%", "incl%");
    for f in s.functions.iter().take(top) {
        let _ = writeln!(
            out,
            "{:>6.2}% {:>6.2}%  {} [{}]",
            pct(f.self_samples, s.samples),
            pct(f.inclusive, s.samples),
            f.name,
            f.module
        );
    }
    std::mem::take(out)
}

/// The `--by` view: samples grouped into a tree by the chosen keys.
pub fn tree_text(t: &CpuTree) -> String {
    let mut out = String::new();
    let out = &mut out;
    let keys: Vec<&str> = t
        .keys
        .iter()
        .map(|k| match k {
            Key::Process => "process",
            Key::Thread => "thread",
            Key::Module => "module",
            Key::Function => "function",
        })
        .collect();
    let _ = writeln!(out, "{} samples by {}", t.samples, keys.join(" → "));
    let _ = writeln!(out, "{:>9} {:>7} {:>7}  ", "samples", "%", "incl%");
    fn rec(out: &mut String, nodes: &[Node], depth: usize, total: u64) {
        for n in nodes {
            let incl = match n.inclusive {
                Some(i) => format!("{:>6.2}%", pct(i, total)),
                None => String::new(),
            };
            let module = match &n.module {
                Some(m) if n.key == Key::Function => format!(" [{m}]"),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                "{:>9} {:>6.2}% {:>7}  {}{}{}",
                n.samples,
                n.percent,
                incl,
                "  ".repeat(depth),
                n.label,
                module
            );
            rec(out, &n.children, depth + 1, total);
        }
    }
    rec(out, &t.rows, 0, t.samples);
    if t.omitted_rows > 0 {
        let _ = writeln!(
            out,
            "({} smaller rows not shown; raise --top)",
            t.omitted_rows
        );
    }
    std::mem::take(out)
}

/// One side of the butterfly view of a function: its callers (nearest
/// first) or its callees, `top` per level.
pub fn butterfly_text(b: &Butterfly, callers: bool, top: Option<usize>) -> String {
    let mut out = String::new();
    let out = &mut out;
    let _ = writeln!(
        out,
        "{} [{}]: self {} ({:.2}%), inclusive {} ({:.2}%) of {} samples",
        b.function,
        b.modules.join(", "),
        b.self_samples,
        pct(b.self_samples, b.total),
        b.inclusive,
        pct(b.inclusive, b.total),
        b.total
    );
    let (title, nodes) = if callers {
        ("callers (nearest first)", &b.callers)
    } else {
        ("callees", &b.callees)
    };
    let _ = writeln!(out, "{title}:");
    fn rec(out: &mut String, nodes: &[BNode], depth: usize, top: Option<usize>) {
        for n in nodes.iter().take(top.unwrap_or(usize::MAX)) {
            let _ = writeln!(
                out,
                "{:>9} {:>6.2}%  {}{} [{}]",
                n.samples,
                n.percent,
                "  ".repeat(depth),
                n.name,
                n.module
            );
            rec(out, &n.children, depth + 1, top);
        }
    }
    rec(out, nodes, 0, top);
    let _ = writeln!(out);
    std::mem::take(out)
}
