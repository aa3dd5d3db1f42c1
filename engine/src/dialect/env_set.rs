//! One entry of the pipeline's `envs:` section.

use serde::Deserialize;

fn one() -> usize {
    1
}

/// A set of environments sharing one env config: `groups × group_size` envs, where the
/// envs of a group all reset with the same seed (same initial state), as ROLL's env
/// manager does. The entry's name in `envs:` is the env tag of its samples.
///
/// ```ron
/// "train": (env: FrozenLake(size: 4, p: 0.8, slippery: false), groups: 16, group_size: 8, max_turns: 8),
/// ```
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvSet<E> {
    /// The environment and its parameters, e.g. `FrozenLake(size: 4)`.
    pub env: E,
    /// Number of env groups.
    pub groups: usize,
    /// Envs per group; they share the group's seed. Group-normalised advantages need > 1.
    #[serde(default = "one")]
    pub group_size: usize,
    /// Turn limit per episode; `None` keeps the env's own limit.
    #[serde(default)]
    pub max_turns: Option<usize>,
    /// Fixed base seed. Validation sets use it so every eval sees the same episodes; when
    /// `None`, seeds derive from the pipeline seed and the step.
    #[serde(default)]
    pub seed: Option<u64>,
}
