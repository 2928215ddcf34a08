//! The `frames` and `stacks` tables: a trace's frames and stack prefix
//! tree under content-hash ids (`ids.rs`), each id written once per run
//! however many traces of the run share it. Frames are named at the
//! function level (module, build id, function): two return addresses in
//! one function are one frame, so stacks match across hosts whatever the
//! load addresses. Does not aggregate samples.

use std::collections::HashSet;

use arrow_array::RecordBatch;
use slowlab_model::trace::Trace;

use crate::columns::{bools, int32s, int64s, opt_int32s, opt_int64s, opt_strings, strings};
use crate::ids::{frame_id, stack_id};
use crate::schema::Table;
use crate::FleetError;

/// The function name of a frame whose address had no symbol.
const UNKNOWN: &str = "[unknown]";

/// Frames and stacks of the traces added so far, without repeats.
#[derive(Default)]
pub struct CodeTables {
    seen_frames: HashSet<i64>,
    frame_id: Vec<i64>,
    module: Vec<String>,
    build_id: Vec<Option<String>>,
    function: Vec<String>,
    kernel: Vec<bool>,
    seen_stacks: HashSet<i64>,
    stack_id: Vec<i64>,
    parent_id: Vec<Option<i64>>,
    stack_frame: Vec<i64>,
    depth: Vec<i32>,
}

impl CodeTables {
    /// Adds a trace's frames and stack nodes; returns the content id of
    /// each of its stack nodes (indexed by `StackIdx`).
    pub fn add_trace(&mut self, trace: &Trace) -> Vec<i64> {
        let frame_ids: Vec<i64> = trace
            .frames
            .iter()
            .map(|f| self.add_frame(trace, f))
            .collect();
        let n = trace.stacks.len();
        let mut ids: Vec<Option<i64>> = vec![None; n];
        // Frames from the root, carried down as `ids` are.
        let mut depths: Vec<u32> = vec![0; n];
        let mut pending = Vec::new();
        for start in 0..n {
            // Walk up to the first node with an id (parents usually come
            // first; the bound stops on a damaged tree with a cycle).
            let mut cur = start;
            while ids[cur].is_none() && pending.len() <= n {
                pending.push(cur);
                match trace.stacks[cur].parent() {
                    Some(p) if p.ix() < n => cur = p.ix(),
                    _ => break,
                }
            }
            while let Some(i) = pending.pop() {
                if ids[i].is_some() {
                    continue;
                }
                let node = &trace.stacks[i];
                let parent_ix = node
                    .parent()
                    .filter(|p| ids.get(p.ix()).is_some_and(Option::is_some));
                let parent = parent_ix.and_then(|p| ids[p.ix()]);
                let depth = parent_ix.map_or(0, |p| depths[p.ix()].saturating_add(1));
                depths[i] = depth;
                let frame = frame_ids
                    .get(node.frame.ix())
                    .copied()
                    .unwrap_or_else(|| frame_id("", None, UNKNOWN, false));
                let id = stack_id(parent, frame);
                ids[i] = Some(id);
                if self.seen_stacks.insert(id) {
                    self.stack_id.push(id);
                    self.parent_id.push(parent);
                    self.stack_frame.push(frame);
                    self.depth.push(i32::try_from(depth).unwrap_or(i32::MAX));
                }
            }
        }
        ids.into_iter().map(|id| id.unwrap_or_default()).collect()
    }

    fn add_frame(&mut self, trace: &Trace, frame: &slowlab_model::trace::Frame) -> i64 {
        let module = trace.modules.get(frame.module.ix());
        let module_name = module.map_or("", |m| trace.str(m.name));
        let build_id = module.and_then(|m| m.build_id.as_deref());
        let function = trace
            .functions
            .get(frame.function.ix())
            .map_or(UNKNOWN, |f| trace.str(f.name));
        let id = frame_id(module_name, build_id, function, frame.kernel);
        if self.seen_frames.insert(id) {
            self.frame_id.push(id);
            self.module.push(module_name.to_owned());
            self.build_id.push(build_id.map(str::to_owned));
            self.function.push(function.to_owned());
            self.kernel.push(frame.kernel);
        }
        id
    }

    /// The `frames` and `stacks` tables.
    pub fn into_batches(self) -> Result<(RecordBatch, RecordBatch), FleetError> {
        let n = self.frame_id.len();
        let frames = RecordBatch::try_new(
            Table::Frames.schema(),
            vec![
                int64s(self.frame_id),
                strings(self.module),
                opt_strings(self.build_id),
                strings(self.function),
                // The model has no line tables yet: file and line are null.
                opt_strings(vec![None; n]),
                opt_int32s(vec![None; n]),
                bools(self.kernel),
            ],
        )?;
        let stacks = RecordBatch::try_new(
            Table::Stacks.schema(),
            vec![
                int64s(self.stack_id),
                opt_int64s(self.parent_id),
                int64s(self.stack_frame),
                int32s(self.depth),
            ],
        )?;
        Ok((frames, stacks))
    }
}
