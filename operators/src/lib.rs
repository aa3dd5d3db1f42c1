//! roll-flow operators.
