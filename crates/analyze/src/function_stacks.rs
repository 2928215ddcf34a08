//! Stacks as their function names read: two stacks whose frames differ
//! (other addresses in the same functions) but whose functions are the
//! same, frame for frame, are one stack here. The views that count events
//! by stack (waits, faults, syscall sites) key them by this, so that one
//! row stands for each stack they print; and a trace read by function
//! (`slowlab_perf::read_file` under a memory budget) counts them the same.
//! Each stack's stand-in is a real stack of the trace (the first seen with
//! those functions). Names nothing and counts nothing itself.

use std::collections::HashMap;

use slowlab_model::trace::{FuncIdx, StackIdx, Trace};

use crate::select::BuildFx;

/// Stand-ins for the stacks asked about so far.
pub struct FunctionStacks<'t> {
    trace: &'t Trace,
    stand_in: HashMap<StackIdx, StackIdx, BuildFx>,
    by_functions: HashMap<(Option<StackIdx>, FuncIdx), StackIdx, BuildFx>,
}

impl<'t> FunctionStacks<'t> {
    pub fn new(trace: &'t Trace) -> Self {
        FunctionStacks {
            trace,
            stand_in: HashMap::default(),
            by_functions: HashMap::default(),
        }
    }

    /// The stack that stands for every stack with the same functions as
    /// `stack`, innermost to outermost.
    pub fn of(&mut self, stack: Option<StackIdx>) -> Option<StackIdx> {
        let stacks = &self.trace.stacks;
        let mut path = Vec::new();
        let mut parent = None;
        let mut at = stack;
        while let Some(node) = at {
            if let Some(&known) = self.stand_in.get(&node) {
                parent = Some(known);
                break;
            }
            // A damaged trace's parent links may loop or point nowhere.
            let Some(n) = stacks.get(node.ix()).filter(|_| path.len() <= stacks.len()) else {
                break;
            };
            path.push(node);
            at = n.parent();
        }
        for &node in path.iter().rev() {
            let function = self.trace.frame_function(stacks[node.ix()].frame);
            let known = *self.by_functions.entry((parent, function)).or_insert(node);
            self.stand_in.insert(node, known);
            parent = Some(known);
        }
        parent.or(stack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slowlab_model::trace::{Frame, FrameIdx, Function, ModuleIdx, StackNode, StrIdx};

    #[test]
    fn stacks_of_the_same_functions_have_one_stand_in() {
        // Frames 0 and 1 are in `main`, 2 and 3 in `work`, 4 in `other`.
        let mut t = Trace::default();
        for name in 0..3 {
            t.functions.push(Function {
                name: StrIdx(name),
                module: ModuleIdx(0),
                kernel: false,
            });
        }
        for func in [0, 0, 1, 1, 2] {
            t.frames.push(Frame {
                module: ModuleIdx(0),
                address: t.frames.len() as u64,
                function: FuncIdx(func),
                kernel: false,
            });
        }
        let node = |t: &mut Trace, parent: Option<u32>, frame: u32| {
            t.stacks
                .push(StackNode::new(parent.map(StackIdx), FrameIdx(frame)));
            Some(StackIdx(t.stacks.len() as u32 - 1))
        };
        let main_a = node(&mut t, None, 0); // 0
        let work_a = node(&mut t, Some(0), 2); // 1: main → work
        let main_b = node(&mut t, None, 1); // 2
        let work_b = node(&mut t, Some(2), 3); // 3: main → work, other frames
        let other = node(&mut t, Some(2), 4); // 4: main → other
        let mut fs = FunctionStacks::new(&t);
        // The first asked about stands in for the others.
        assert_eq!(fs.of(work_b), work_b);
        assert_eq!(fs.of(work_a), work_b);
        assert_eq!(fs.of(main_a), main_b);
        assert_eq!(fs.of(main_b), main_b);
        assert_eq!(fs.of(other), other);
        assert_eq!(fs.of(None), None);
        let mut fresh = FunctionStacks::new(&t);
        assert_eq!(fresh.of(work_a), work_a);
        assert_eq!(fresh.of(work_b), work_a);
        // A stack index out of range is its own stand-in.
        assert_eq!(fs.of(Some(StackIdx(99))), Some(StackIdx(99)));
    }
}
