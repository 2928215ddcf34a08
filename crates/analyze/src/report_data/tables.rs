//! The string, function and stack tables of the interactive report: only
//! what the report's events use, renumbered densely. A stack is a node of a
//! prefix tree keyed by (parent, function), so frames of one function at
//! different addresses share a node and the tree *is* the call tree the
//! flame graphs draw; every stack starts at a node naming its process, as
//! the folded stacks of the flame graph exports do. Parents always come
//! before their children, so a page can sum a tree in one backward pass.
//!
//! It does not decide which events are shown (`events.rs` does).

use std::collections::HashMap;

use slowlab_model::trace::{FuncIdx, StackIdx, StrIdx, Trace};
use slowlab_model::views::report_data::{FuncColumns, StackColumns};

use crate::select::BuildFx;
use crate::unnamed;

/// Builds the three tables while the events are converted.
pub struct Tables<'t> {
    trace: &'t Trace,
    pub strings: Vec<String>,
    string_ix: HashMap<String, u32, BuildFx>,
    trace_string: HashMap<StrIdx, u32, BuildFx>,
    pub funcs: FuncColumns,
    func_ix: HashMap<FuncIdx, u32, BuildFx>,
    process_func: HashMap<u32, u32, BuildFx>,
    pub stacks: StackColumns,
    node_ix: HashMap<(i32, u32), u32, BuildFx>,
    /// (process name string, trace stack) → node.
    memo: HashMap<(u32, Option<StackIdx>), u32, BuildFx>,
}

impl<'t> Tables<'t> {
    pub fn new(trace: &'t Trace) -> Self {
        Tables {
            trace,
            strings: Vec::new(),
            string_ix: HashMap::default(),
            trace_string: HashMap::default(),
            funcs: FuncColumns::default(),
            func_ix: HashMap::default(),
            process_func: HashMap::default(),
            stacks: StackColumns::default(),
            node_ix: HashMap::default(),
            memo: HashMap::default(),
        }
    }

    /// The index of a string in the report's table.
    pub fn string(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.string_ix.get(s) {
            return i;
        }
        let i = self.strings.len() as u32;
        self.strings.push(s.to_owned());
        self.string_ix.insert(s.to_owned(), i);
        i
    }

    /// The index of one of the trace's strings.
    pub fn trace_string(&mut self, idx: StrIdx) -> u32 {
        if let Some(&i) = self.trace_string.get(&idx) {
            return i;
        }
        let i = self.string(self.trace.str(idx));
        self.trace_string.insert(idx, i);
        i
    }

    fn function(&mut self, f: FuncIdx) -> u32 {
        if let Some(&i) = self.func_ix.get(&f) {
            return i;
        }
        let func = &self.trace.functions[f.ix()];
        // Code without symbols in a binary is named by the binary.
        let name = match unnamed::unnamed_binary(self.trace, f) {
            Some(_) => self.string(&unnamed::label(self.trace, f)),
            None => self.trace_string(func.name),
        };
        let module = self.trace.modules[func.module.ix()].name;
        let module = self.trace_string(module);
        let i = self.funcs.name.len() as u32;
        self.funcs.name.push(name);
        self.funcs.module.push(module);
        self.funcs.kind.push(u8::from(func.kernel));
        self.func_ix.insert(f, i);
        i
    }

    fn process_function(&mut self, comm: u32) -> u32 {
        if let Some(&i) = self.process_func.get(&comm) {
            return i;
        }
        let i = self.funcs.name.len() as u32;
        let empty = self.string("");
        self.funcs.name.push(comm);
        self.funcs.module.push(empty);
        self.funcs.kind.push(2);
        self.process_func.insert(comm, i);
        i
    }

    fn node(&mut self, parent: i32, func: u32) -> u32 {
        if let Some(&i) = self.node_ix.get(&(parent, func)) {
            return i;
        }
        let i = self.stacks.parent.len() as u32;
        self.stacks.parent.push(parent);
        self.stacks.func.push(func);
        self.node_ix.insert((parent, func), i);
        i
    }

    /// The node of `stack` under the root of process name `comm` (a trace
    /// string); a missing stack is the process node itself.
    pub fn stack(&mut self, comm: StrIdx, stack: Option<StackIdx>) -> u32 {
        let comm = self.trace_string(comm);
        self.stack_under(comm, stack)
    }

    fn stack_under(&mut self, comm: u32, stack: Option<StackIdx>) -> u32 {
        if let Some(&n) = self.memo.get(&(comm, stack)) {
            return n;
        }
        let n = match stack.and_then(|s| self.trace.stacks.get(s.ix()).map(|n| (s, *n))) {
            None => {
                let f = self.process_function(comm);
                self.node(-1, f)
            }
            Some((_, node)) => {
                // Recursion depth is the stack's depth; perf caps it (127 by
                // default), so this cannot run away.
                let parent = self.stack_under(comm, node.parent());
                let f = self.function(self.trace.frame_function(node.frame));
                // A run of frames without a name (code without symbols in
                // one binary, or a broken frame-pointer chain) tells
                // nothing frame by frame: one node stands for the run.
                let unknown = |t: &Self, f: u32| {
                    let name = &t.strings[t.funcs.name[f as usize] as usize];
                    name == unnamed::UNKNOWN || name.ends_with(unnamed::NO_SYMBOLS)
                };
                if unknown(self, f) && self.stacks.func[parent as usize] == f {
                    parent
                } else {
                    self.node(parent as i32, f)
                }
            }
        };
        self.memo.insert((comm, stack), n);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::small_trace;

    #[test]
    fn stacks_share_nodes_by_function_and_start_at_the_process() {
        let t = small_trace();
        let mut tables = Tables::new(&t);
        let comm = t.processes[0].comm;
        let a = tables.stack(comm, t.samples.stack[0]);
        let b = tables.stack(comm, t.samples.stack[0]);
        assert_eq!(a, b);
        // Walk to the root: it is the process node.
        let mut n = a as i32;
        let mut names = Vec::new();
        while n >= 0 {
            let f = tables.stacks.func[n as usize] as usize;
            names.push(tables.strings[tables.funcs.name[f] as usize].clone());
            let p = tables.stacks.parent[n as usize];
            assert!(p < n, "parents come first");
            n = p;
        }
        assert_eq!(names.last().map(String::as_str), Some("app"));
        assert_eq!(tables.funcs.kind[tables.stacks.func[0] as usize], 2);
        let none = tables.stack(comm, None);
        assert_eq!(tables.stacks.parent[none as usize], -1);
    }

    #[test]
    fn a_run_of_unnamed_frames_is_one_node() {
        let mut b = crate::testutil::TraceBuilder::default();
        let a = b.process(1, "a");
        let s = b.mixed_stack(
            &[
                "main",
                "[unknown] in liblzma.so.5",
                "[unknown] in liblzma.so.5",
                "[unknown] in liblzma.so.5",
                "work",
            ],
            &[],
        );
        b.sample(1, a, 0, s);
        let t = b.build();
        let mut tables = Tables::new(&t);
        let n = tables.stack(t.processes[0].comm, s);
        let mut names = Vec::new();
        let mut x = n as i32;
        while x >= 0 {
            let f = tables.stacks.func[x as usize] as usize;
            names.push(tables.strings[tables.funcs.name[f] as usize].clone());
            x = tables.stacks.parent[x as usize];
        }
        assert_eq!(names, ["work", "liblzma.so.5 (no symbols)", "main", "a"]);
    }
}
