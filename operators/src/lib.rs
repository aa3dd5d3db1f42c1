//! roll-flow operators.
pub mod envs;
