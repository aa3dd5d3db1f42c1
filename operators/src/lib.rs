//! roll-flow operators.
//!
//! - [`algo`]: advantage estimators, reward shaping, KL control and the policy/value
//!   losses, all working on [`roll_flow_engine::Batch`] columns.

pub mod algo;
