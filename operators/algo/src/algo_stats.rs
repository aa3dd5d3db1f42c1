//! [`AlgoStats`]: the scalar metrics an estimator, shaping step or loss reports.

use std::collections::BTreeMap;

/// Scalar metrics of one call (e.g. `adv/mean`, `kl/beta`), for tracking.
pub type AlgoStats = BTreeMap<String, f64>;
