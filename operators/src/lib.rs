//! roll-flow operators.
pub mod model;
