//! Env faults in a step: an episode an env server lost (it crashed, hung, wrote a bad
//! reply) takes its whole group with it, since group-normalised advantages need every
//! member; the rest of the step goes on. The counts, summed over a run's workers, become
//! `env_errors` and `dropped_groups` in the node's metrics.

use std::collections::BTreeSet;

use super::episode::Episode;
use super::episode_run::EpisodeOutcome;

/// What env faults cost a step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvFaults {
    /// Episodes lost to env faults.
    pub env_errors: usize,
    /// Groups dropped because one of their episodes was lost.
    pub dropped_groups: usize,
    /// The first fault's message, for the log.
    pub first: Option<String>,
}

/// The played episodes of the groups no fault touched, in order, and what was dropped.
pub fn drop_lost_groups(outcomes: Vec<EpisodeOutcome>) -> (Vec<Episode>, EnvFaults) {
    let mut faults = EnvFaults::default();
    let mut lost_groups = BTreeSet::new();
    for outcome in &outcomes {
        if let EpisodeOutcome::Lost { slot, reason } = outcome {
            faults.env_errors += 1;
            lost_groups.insert(slot.group_id);
            faults.first.get_or_insert_with(|| reason.clone());
        }
    }
    faults.dropped_groups = lost_groups.len();
    let episodes = outcomes
        .into_iter()
        .filter_map(|outcome| match outcome {
            EpisodeOutcome::Played(e) if !lost_groups.contains(&e.slot.group_id) => Some(*e),
            _ => None,
        })
        .collect();
    (episodes, faults)
}

impl EnvFaults {
    /// The counts to sum over a run's workers ([`super::gathered`]).
    pub fn counts(&self) -> [f64; 2] {
        [self.env_errors as f64, self.dropped_groups as f64]
    }

    /// These faults with the counts summed over every worker (`totals`, as from
    /// [`counts`](Self::counts)); the first message stays this worker's own.
    pub fn with_totals(self, totals: &[f64]) -> EnvFaults {
        match totals {
            [errors, dropped] => EnvFaults {
                env_errors: *errors as usize,
                dropped_groups: *dropped as usize,
                first: self.first,
            },
            _ => self,
        }
    }

    /// Adds `env_errors` and `dropped_groups` to `metrics`, and says what happened on
    /// stderr when anything was dropped.
    pub fn report(&self, step: u64, metrics: &mut std::collections::BTreeMap<String, f64>) {
        metrics.insert("env_errors".into(), self.env_errors as f64);
        metrics.insert("dropped_groups".into(), self.dropped_groups as f64);
        if let Some(first) = &self.first {
            eprintln!(
                "warning: step {step}: {} episode(s) lost to env faults, {} group(s) dropped; the first: {first}",
                self.env_errors, self.dropped_groups
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use roll_flow_envs::EnvSlot;

    use super::drop_lost_groups;
    use crate::rollout::episode::Episode;
    use crate::rollout::episode_run::EpisodeOutcome;

    fn slot(group_id: usize) -> EnvSlot {
        EnvSlot {
            env_tag: "t".into(),
            group_id,
            group_in_tag: group_id,
            index_in_group: 0,
            seed: 0,
            max_turns: 1,
        }
    }

    fn played(group_id: usize) -> EpisodeOutcome {
        EpisodeOutcome::Played(Box::new(Episode::start(slot(group_id), String::new())))
    }

    #[test]
    fn a_lost_episode_drops_its_whole_group_and_only_it() {
        let lost = |g, why: &str| EpisodeOutcome::Lost {
            slot: slot(g),
            reason: why.into(),
        };
        let outcomes = vec![
            played(0),
            played(0),
            played(1),
            lost(1, "crash"),
            lost(2, "hang"),
            lost(2, "hang"),
            played(3),
        ];
        let (episodes, faults) = drop_lost_groups(outcomes);
        let groups: Vec<usize> = episodes.iter().map(|e| e.slot.group_id).collect();
        assert_eq!(groups, vec![0, 0, 3]);
        assert_eq!((faults.env_errors, faults.dropped_groups), (3, 2));
        assert_eq!(faults.first.as_deref(), Some("crash"));
        // Another worker lost 2 episodes of 1 group: the counts add, the message stays ours.
        let totals = [faults.counts(), [2.0, 1.0]];
        let summed: Vec<f64> = (0..2).map(|k| totals[0][k] + totals[1][k]).collect();
        let all = faults.with_totals(&summed);
        assert_eq!((all.env_errors, all.dropped_groups), (5, 3));
        assert_eq!(all.first.as_deref(), Some("crash"));
    }
}
