//! The pipeline file: serde types, loading with precise error locations, and overrides.
//!
//! A pipeline is one RON file holding named models, envs, nodes and the edges between
//! nodes. Parsing is done by `ron` into the typed [`Pipeline`]; errors are turned into
//! [`Diagnostic`]s that name the file, line:column and show the offending source line.
//! Errors found after parsing (graph checks) point into the file through [`locate`], which
//! finds the span of a value from its path (`nodes` → `"adv"` → `norm`).

pub mod diagnostic;
pub mod load;
pub mod locate;
pub mod overrides;
pub mod suggest;

pub use crate::dialect::env_set::EnvSet;
pub use crate::dialect::ordered_map::OrderedMap;
pub use crate::dialect::{Device, Pipeline};
pub use diagnostic::{Diagnostic, Location, Severity};
pub use load::{load, load_text, parse, ron_options, Loaded, Source};
