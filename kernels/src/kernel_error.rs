//! [`KernelError`]: what the kernels' entry points refuse, and why.

/// A request the kernels refuse, with what was wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{op}: {message}")]
pub struct KernelError {
    pub op: &'static str,
    pub message: String,
}

/// Refuses `op` with `message`.
pub(crate) fn refuse<T>(op: &'static str, message: String) -> Result<T, KernelError> {
    Err(KernelError { op, message })
}
