//! What the imports of ROLL's Qwen2.5-0.5B agentic examples share (its FrozenLake and
//! Sokoban files set the same training), checked once here for the test files, and the
//! prompt an imported pipeline shows.

use roll_flow::algo::grouping::{Grouping, Norm};
use roll_flow::algo::{PolicyLoss, Shaping};
use roll_flow::engine::dialect::Pipeline;
use roll_flow::model::spec::{ArchSpec, LrSchedule, OptimSpec};
use roll_flow::operators::catalog::RollFlow;
use roll_flow::operators::play_settings::SampleMode;
use roll_flow::operators::prompt::{EpisodeVars, HistoryTurn, TurnVars};
use roll_flow::operators::registry::Node;

fn node<'p>(p: &'p Pipeline<RollFlow>, name: &str) -> &'p Node {
    p.nodes
        .get(name)
        .unwrap_or_else(|| panic!("no node {name}"))
}

/// The policy (Qwen2.5-0.5B-Instruct, lr 1e-6 cosine with 10 warmup steps, gradients
/// clipped at 1), no reference model (init_kl_coef 0, no KL loss), sampling at 0.99 /
/// top_p 0.99 / top_k 100 with 64 tokens a turn in 8,192, GRPO advantages whitened and
/// clipped at 0.2, and the PPO clip at 0.2 without dual clip, one epoch, no KL term.
pub fn assert_rolls_example_training(p: &Pipeline<RollFlow>) {
    let policy = p.models.get("policy").unwrap();
    assert_eq!(
        policy.arch,
        ArchSpec::HfDir("Qwen/Qwen2.5-0.5B-Instruct".into())
    );
    let OptimSpec::AdamW {
        lr,
        warmup_steps,
        schedule,
        grad_clip,
        ..
    } = policy.optim;
    assert_eq!(
        (lr, warmup_steps, schedule, grad_clip),
        (1e-6, 10, LrSchedule::Cosine, Some(1.0))
    );
    assert!(
        !p.models.contains("reference"),
        "init_kl_coef 0 and no KL loss: no reference model"
    );
    let Node::Rollout(rollout) = node(p, "rollout") else {
        panic!()
    };
    assert_eq!(
        (rollout.temperature, rollout.top_p, rollout.top_k),
        (0.99, 0.99, Some(100))
    );
    assert_eq!(
        (rollout.max_new_tokens, rollout.sequence_length),
        (64, 8192)
    );
    let Node::Grpo(grpo) = node(p, "adv") else {
        panic!()
    };
    assert_eq!(
        (grpo.group_by, grpo.norm, grpo.kl_penalty.clone()),
        (Grouping::Group, Norm::MeanStd, None)
    );
    assert_eq!(
        grpo.shaping,
        Shaping {
            whiten: true,
            advantage_clip: Some(0.2),
            ..Shaping::default()
        }
    );
    let Node::ActorStep(actor) = node(p, "actor_step") else {
        panic!()
    };
    let PolicyLoss::PpoClip(clip) = &actor.loss else {
        panic!()
    };
    assert_eq!((clip.low, clip.high, clip.dual_clip), (0.2, 0.2, None));
    assert_eq!((actor.kl.clone(), actor.ppo_epochs), (None, 1));
}

/// The user message the imported pipeline's rollout shows at turn `index` (0-based) of an
/// episode of `max_turns` turns whose env instruction is `instruction`, rendered by
/// roll-flow's prompt code as the rollout plays it.
pub fn rendered_turn(
    p: &Pipeline<RollFlow>,
    instruction: &str,
    max_turns: usize,
    index: usize,
    observation: &str,
    history: Vec<HistoryTurn>,
) -> (Option<String>, String) {
    let Node::Rollout(rollout) = node(p, "rollout") else {
        panic!()
    };
    let step_wise = matches!(rollout.samples, SampleMode::Step { .. });
    let templates = rollout.prompt.played(rollout.instruction, step_wise);
    let episode = EpisodeVars {
        instruction,
        env: "train",
        max_turns,
        actions: &[],
        sample: 0,
    };
    let turn = TurnVars {
        observation,
        index,
        valid_actions: Vec::new(),
        history,
    };
    (
        templates.system(&episode).unwrap(),
        templates.turn(&episode, &turn).unwrap(),
    )
}
