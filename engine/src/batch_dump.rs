//! `roll-flow run --dump-batches DIR`: the batch each training node received, per step, so
//! users can inspect exactly what was trained on.
//!
//! Format: `DIR/step_NNNNNN/<node>.json`, one JSON object per file (the [`Batch`]'s serde
//! form):
//!
//! ```json
//! {"tokens": [..all token ids, sample after sample..],
//!  "offsets": [0, n0, n0+n1, ...],
//!  "token_columns": {"response_mask": {"Bool": [...]}, "advantages": {"F32": [...]}, ...},
//!  "sample_columns": {"score": {"F32": [...]}, "group_id": {"U64": [...]}, ...}}
//! ```
//!
//! Sample `i` owns `tokens[offsets[i]..offsets[i+1]]` and the same range of every token
//! column; sample columns hold one value per sample. Files are written atomically;
//! [`read`] reads one back, checked. A policy update also writes what its loss made of
//! each token beside it, in the same format (`<node>.loss.json`: the operators crate's
//! `training::loss_dump`).

use std::path::{Path, PathBuf};

use crate::atomic_file::write_atomic;
use crate::batch::Batch;
use crate::operator::{Operator, OperatorError, StepContext};

/// Wraps an operator and writes its input batch before processing it.
pub struct DumpInput {
    pub inner: Box<dyn Operator>,
    pub dir: PathBuf,
    pub node: String,
}

impl Operator for DumpInput {
    fn process(&mut self, ctx: &mut StepContext, input: Batch) -> Result<Batch, OperatorError> {
        let path = self
            .dir
            .join(format!("step_{:06}", ctx.step))
            .join(format!("{}.json", self.node));
        let bytes = serde_json::to_vec(&input)
            .map_err(|e| OperatorError(format!("--dump-batches: {e}")))?;
        write_atomic(&path, &bytes).map_err(|e| {
            OperatorError(format!(
                "--dump-batches: cannot write {}: {e}",
                path.display()
            ))
        })?;
        self.inner.process(ctx, input)
    }
}

/// Reads a dump file back as the batch it holds; an error names the file and what is
/// wrong (JSON with its line and column, or parts that do not fit together).
pub fn read(path: &Path) -> Result<Batch, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}
