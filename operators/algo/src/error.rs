//! The error every estimator and loss returns: names the node kind and says what to fix.

use roll_flow_engine::BatchError;

/// An algorithm could not run on its input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AlgoError {
    /// A column the algorithm reads is absent; `hint` says which node or setting gives it.
    #[error("{node} needs column `{column}`{}", hint_suffix(.hint))]
    MissingColumn {
        node: &'static str,
        column: String,
        hint: Option<String>,
    },
    /// A column exists but cannot be read as needed (wrong type or length).
    #[error("{node}: {source}")]
    Batch {
        node: &'static str,
        source: BatchError,
    },
    /// The data or the configuration breaks a rule of the algorithm.
    #[error("{node}: {message}")]
    Invalid { node: &'static str, message: String },
}

fn hint_suffix(hint: &Option<String>) -> String {
    hint.as_ref().map(|h| format!("; {h}")).unwrap_or_default()
}

impl AlgoError {
    /// A missing column's error with the advice of the reader's `contract` for it.
    pub fn with_hint_from(self, contract: &roll_flow_engine::Contract) -> Self {
        match self {
            AlgoError::MissingColumn {
                node,
                column,
                hint: None,
            } => {
                let hint = contract
                    .needs
                    .iter()
                    .find(|n| n.column.name() == column)
                    .and_then(|n| n.hint.clone());
                AlgoError::MissingColumn { node, column, hint }
            }
            other => other,
        }
    }

    pub fn invalid(node: &'static str, message: impl Into<String>) -> Self {
        AlgoError::Invalid {
            node,
            message: message.into(),
        }
    }
}
