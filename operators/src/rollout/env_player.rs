//! [`EnvPlayer`]: the env sets a node plays and the policy it plays them with, what
//! `Rollout`, `Eval` and `roll-flow play --policy` share.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use roll_flow_engine::StepContext;
use roll_flow_envs::manager::{EnvManager, EnvSlot, Shard};
use roll_flow_model::generate::AnswerChoices;
use roll_flow_model::TextTokenizer;

use super::early_cut::CarriedGroup;
use super::episode::Episode;
use super::faults::EnvFaults;
use super::inference::InferenceStats;
use super::play::{play_episodes, PlayedSlots, StepKeys};
use super::stats::EpisodeSummary;
use crate::play_settings::{Guide, PlaySettings};
use crate::runtime::backend::RunBackend;
use crate::runtime::models::PolicyModel;
use crate::runtime::resources::{Guides, Runtime, NO_GUIDES};
use crate::runtime::weight_versions::StepWeights;

/// Builds and registers the answer guide of every env tag in `tags`, if `guide` asks: the
/// replies `<answer>NAME</answer>` for the env's action names, less the `reply_start` the
/// prompt already holds.
pub fn register_guides(
    guide: Guide,
    reply_start: &str,
    tags: &[String],
    manager: &EnvManager,
    tokenizer: &TextTokenizer,
    guides: &RefCell<Guides>,
) -> Result<(), String> {
    if guide == Guide::Free {
        return Ok(());
    }
    let stop = tokenizer
        .token_id("<|im_end|>")
        .or_else(|| tokenizer.stop_tokens().first().copied())
        .ok_or("`guide: Actions` needs a tokenizer with an end-of-message token")?;
    for tag in tags {
        let env = manager
            .build_env(tag)
            .map_err(|e| format!("env `{tag}`: {e}"))?;
        let names = env.action_names();
        if names.is_empty() {
            return Err(format!(
                "`guide: Actions`: env `{tag}` ({}) has no fixed action set; use `guide: Free`",
                env.name()
            ));
        }
        let mut texts = Vec::with_capacity(names.len());
        for name in names {
            let answer = format!("<answer>{name}</answer>");
            let Some(rest) = answer.strip_prefix(reply_start) else {
                return Err(format!(
                    "`guide: Actions` replies `{answer}` to env `{tag}`, which does not open \
                     with `prompt.reply_start` (`{reply_start}`); make it a start of \
                     `<answer>` or drop it"
                ));
            };
            texts.push(rest.to_string());
        }
        let choices =
            AnswerChoices::from_texts(tokenizer, &texts, stop).map_err(|e| e.to_string())?;
        guides.borrow_mut().insert(tag.clone(), Arc::new(choices));
    }
    Ok(())
}

/// The env sets a node plays and the policy it plays them with: what `Rollout` and
/// `Eval` share.
pub struct EnvPlayer<B: RunBackend> {
    tags: Vec<String>,
    manager: EnvManager,
    policy: Rc<RefCell<PolicyModel<B>>>,
    /// Whether this player plays guided; the guides themselves are the shared table's, as
    /// scoring reads them too.
    guide: Guide,
    guides: Rc<RefCell<Guides>>,
    settings: PlaySettings,
    /// The groups a partial rollout's last step did not keep, to play on
    /// ([`super::early_cut`]).
    carried: RefCell<Vec<CarriedGroup>>,
}

impl<B: RunBackend> EnvPlayer<B> {
    /// Loads `policy` and registers the answer guide of every tag when `guide` asks.
    pub fn build(
        tags: &[String],
        policy: &str,
        guide: Guide,
        settings: PlaySettings,
        runtime: &mut Runtime<B>,
    ) -> Result<Self, String> {
        let manager = env_manager(runtime, tags)?;
        let policy = runtime.policy(policy)?;
        register_guides(
            guide,
            settings.prompt.reply_start(),
            tags,
            &manager,
            &policy.borrow().tokenizer,
            &runtime.guides,
        )?;
        Ok(EnvPlayer {
            tags: tags.to_vec(),
            manager,
            policy,
            guide,
            guides: runtime.guides.clone(),
            settings,
            carried: RefCell::default(),
        })
    }

    /// Ends guided decoding for this player's tags: their replies are free text from now
    /// on, and scoring takes log-probs over the whole vocabulary again.
    pub fn free_replies(&self) {
        let mut guides = self.guides.borrow_mut();
        for tag in &self.tags {
            guides.remove(tag);
        }
    }

    pub fn tags(&self) -> &[String] {
        &self.tags
    }

    /// The env manager over this player's tags.
    pub fn manager(&self) -> &EnvManager {
        &self.manager
    }

    /// How this player plays.
    pub fn settings(&self) -> &PlaySettings {
        &self.settings
    }

    /// The longest sequence the policy's inference copy handles.
    pub fn context(&self) -> usize {
        self.policy
            .borrow()
            .inference()
            .config
            .max_position_embeddings
    }

    /// The policy's tokenizer (to show its tokens as text).
    pub fn tokenizer(&self) -> Arc<TextTokenizer> {
        self.policy.borrow().tokenizer.clone()
    }

    /// The policy's inference weights as they are now, to play later steps with (an
    /// asynchronous rollout's). Cheap: burn tensors share their storage when cloned, and
    /// publishing replaces the inference copy instead of writing into it.
    pub fn starting_weights(&self) -> StepWeights<B> {
        let policy = self.policy.borrow();
        StepWeights {
            version: policy.version,
            model: Arc::new(policy.inference().clone()),
            trained_from: policy.published_from(),
        }
    }

    /// Plays this worker's slots of `ctx.step`.
    pub fn play(&self, ctx: &StepContext) -> Result<Played, String> {
        let shard = Shard {
            worker: ctx.worker,
            workers: ctx.workers,
        };
        let carried = self.carried.borrow();
        let slots = step_slots(
            &self.manager,
            &self.tags,
            ctx.step,
            shard,
            &self.settings,
            &carried,
        )?;
        drop(carried);
        self.play_slots(slots, ctx.seed, shard)
    }

    /// What the episode metrics read of `episodes`, each placed by its slot's position
    /// among every worker's slots, so that workers can gather them in one-worker order.
    pub fn summaries(&self, episodes: &[Episode]) -> Vec<EpisodeSummary> {
        (episodes.iter())
            .map(|e| EpisodeSummary::of(e, self.manager.slot_position(&e.slot)))
            .collect()
    }

    /// Plays the given slots of worker `shard` with sampling seed `seed` (and the groups
    /// a partial rollout carried over from the last step). A `Guide::Free` player plays
    /// free text even on a tag another node guides (an `Eval` on a warm-up rollout's own
    /// env set).
    pub fn play_slots(
        &self,
        slots: Vec<EnvSlot>,
        seed: u64,
        shard: Shard,
    ) -> Result<Played, String> {
        let policy = self.policy.borrow();
        let keys = StepKeys {
            seed,
            version: policy.version,
            shard,
        };
        let carried = self.carried.take();
        let shared = self.guides.borrow();
        let guides = match self.guide {
            Guide::Free => &NO_GUIDES,
            Guide::Actions => &*shared,
        };
        let played = play_episodes(
            policy.inference(),
            &policy.tokenizer,
            &self.settings,
            &self.manager,
            (slots, carried),
            guides,
            keys,
        )?;
        Ok(Played::new(
            played,
            policy.version,
            &mut self.carried.borrow_mut(),
        ))
    }
}

/// What one [`EnvPlayer::play`] gave.
pub struct Played {
    /// The episodes, in slot order, less the groups env faults lost.
    pub episodes: Vec<Episode>,
    pub inference: InferenceStats,
    pub faults: EnvFaults,
    /// What a partial rollout did with the groups it did not keep ([`super::early_cut`]):
    /// episodes dropped, episodes carried to the next step, and groups kept that began in
    /// an earlier step.
    pub cut_episodes: usize,
    pub carried_episodes: usize,
    pub resumed_groups: usize,
    /// The policy version that played.
    pub version: u64,
}

impl Played {
    /// What `played` gave, its carried groups moved to `carry`.
    pub fn new(played: PlayedSlots, version: u64, carry: &mut Vec<CarriedGroup>) -> Played {
        let not_kept = played.not_kept;
        *carry = not_kept.carry;
        Played {
            episodes: played.episodes,
            inference: played.inference,
            faults: played.faults,
            cut_episodes: not_kept.dropped,
            carried_episodes: not_kept.carried,
            resumed_groups: not_kept.resumed_groups,
            version,
        }
    }
}

/// An env manager over the named env sets of the pipeline.
pub fn env_manager<B: RunBackend>(
    runtime: &Runtime<B>,
    tags: &[String],
) -> Result<EnvManager, String> {
    let envs = &runtime.plan.envs;
    let entries = tags
        .iter()
        .map(|t| match envs.get(t) {
            Some(set) => Ok((t.as_str(), set)),
            None => Err(format!("no env set `{t}` in `envs:`")),
        })
        .collect::<Result<Vec<_>, String>>()?;
    EnvManager::new(entries, runtime.run.seed).map_err(|e| e.to_string())
}

/// This worker's slots of every tag at `step`, with the extra groups a partial rollout
/// starts: `settings.extra_groups` per tag, less the tag's groups `carried` from the last
/// step, so that a step never plays more than its own groups and the extra ones.
pub fn step_slots(
    manager: &EnvManager,
    tags: &[String],
    step: u64,
    shard: Shard,
    settings: &PlaySettings,
    carried: &[CarriedGroup],
) -> Result<Vec<EnvSlot>, String> {
    let mut slots = Vec::new();
    for tag in tags {
        let carried = (carried.iter())
            .filter(|g| g.members.first().is_some_and(|m| m.slot().env_tag == *tag))
            .count();
        slots.extend(
            manager
                .slots_with_extra(tag, step, shard, (settings.extra_groups, carried))
                .map_err(|e| e.to_string())?,
        );
    }
    Ok(slots)
}
