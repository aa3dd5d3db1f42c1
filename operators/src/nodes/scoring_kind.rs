//! The node kind of the scoring nodes (`LogProb`, `RefLogProb`, `Values`): each scores
//! every response token under its `model`, gradients off, into one token column. They
//! differ only in the column and the operator, so `scoring_node_kind!` writes their
//! [`NodeKind`](super::kind::NodeKind) once: the contract (the response tokens in, the
//! column out), the column as the one they may give, the model as their reference.

use roll_flow_engine::batch::column::RESPONSE_MASK;
use roll_flow_engine::{Column, Contract, Need};

/// What a scoring node needs and gives: the response tokens in, one token column out.
pub fn scoring_contract(gives: Column) -> Contract {
    Contract {
        needs: vec![Need::column(RESPONSE_MASK)],
        gives: vec![gives],
        ..Contract::default()
    }
}

/// `impl NodeKind` for the settings `$spec` (a struct with a `model: String` field) of a
/// node that scores into `$column`, its operator built by `$build`, an expression in
/// `$spec`'s value `$this` and the runtime `$runtime`.
macro_rules! scoring_node_kind {
    ($spec:ty, $column:expr, |$this:ident, $runtime:ident| $build:expr) => {
        impl $crate::nodes::kind::NodeKind for $spec {
            fn contract(&self) -> roll_flow_engine::Contract {
                $crate::nodes::scoring_kind::scoring_contract($column)
            }

            fn may_give() -> Vec<roll_flow_engine::Column> {
                vec![$column]
            }

            fn references(&self) -> Vec<roll_flow_engine::Reference> {
                $crate::nodes::kind::model_ref(&self.model)
            }

            fn build<B: $crate::runtime::backend::RunBackend>(
                &self,
                _name: &str,
                runtime: &mut $crate::runtime::resources::Runtime<B>,
            ) -> Result<Box<dyn roll_flow_engine::Operator>, String> {
                let ($this, $runtime) = (self, runtime);
                $build
            }
        }
    };
}
pub(crate) use scoring_node_kind;
