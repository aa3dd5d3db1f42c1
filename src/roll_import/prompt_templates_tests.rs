//! Each translated template, rendered by roll-flow's prompt code, gives the text ROLL's
//! env manager formats (expected strings written out by hand from the Python code).

use super::*;
use roll_flow_operators::prompt::{
    EpisodeVars, HistoryTurn, PromptSpec, PromptTemplates, TurnVars,
};

fn vars(manager: Manager) -> Vars {
    Vars {
        manager,
        instruction: "{{ instruction }}".into(),
        max_tokens_per_step: Some(64),
    }
}

/// Renders `turn` (and no system template) for turn `index` (0-based) of a 10-turn
/// episode whose instruction is `Rules.`, with `history`.
fn render(turn: &str, index: usize, observation: &str, history: Vec<HistoryTurn>) -> String {
    let templates = PromptTemplates::try_from(PromptSpec {
        system: None,
        turn: Some(turn.to_string()),
        reply_start: None,
    })
    .unwrap_or_else(|e| panic!("{e}\n{turn}"));
    let episode = EpisodeVars {
        instruction: "Rules.",
        env: "train_Lake",
        max_turns: 10,
        actions: &[],
        sample: 0,
    };
    let turn_vars = TurnVars {
        observation,
        index,
        valid_actions: Vec::new(),
        history,
    };
    templates.turn(&episode, &turn_vars).unwrap()
}

fn turn(step: usize, observation: &str, action: &str, reward: &str) -> HistoryTurn {
    HistoryTurn {
        step,
        observation: observation.into(),
        action: action.into(),
        reward: reward.into(),
    }
}

/// ROLL's traj_envs.yaml `agent_template`.
const TRAJ: &str = "Turn {turn_idx}:\nObservation:\n{observation}\nStrictly follow this format:\n1. output format is '<answer> [your answer] </answer>' with no extra text. \n2. You have {actions_left} actions left. \n3. Max response length: {max_response_length} words (tokens).\nDecide the next action:\n";

#[test]
fn trajectory_template_renders_as_rolls_format() {
    let t = translate(TRAJ, &vars(Manager::Trajectory))
        .map_err(|e| e.text)
        .unwrap();
    assert!(!t.suffix);
    // Turn 3 of 10: ROLL's actions_left = max_steps − steps taken = 10 − 2.
    let third = render(&t.text, 2, "_P_\n_G_", Vec::new());
    assert_eq!(
        third,
        "Turn 3:\nObservation:\n_P_\n_G_\nStrictly follow this format:\n1. output format is '<answer> [your answer] </answer>' with no extra text. \n2. You have 8 actions left. \n3. Max response length: 64 words (tokens).\nDecide the next action:\n"
    );
}

#[test]
fn literal_braces_and_gem_suffix() {
    // gem_rg's template: `{{answer}}` is a literal `{answer}`.
    let template = "{observation}\nEnsure that your response includes the format of '\\boxed{{answer}}', e.g. \\boxed{{A}}.";
    let t = translate(template, &vars(Manager::Trajectory))
        .map_err(|e| e.text)
        .unwrap();
    assert_eq!(
        render(&t.text, 0, "How many r?", Vec::new()),
        "How many r?\nEnsure that your response includes the format of '\\boxed{answer}', e.g. \\boxed{A}."
    );
    let games = translate("{observation}\n{suffix}\n", &vars(Manager::Trajectory))
        .map_err(|e| e.text)
        .unwrap();
    assert!(games.suffix, "GEM's suffix is reported");
    assert_eq!(render(&games.text, 0, "Guess.", Vec::new()), "Guess.\n\n");
}

#[test]
fn step_template_renders_rolls_history() {
    let template = "## Env Instruction: {env_instruction}\nPrior to this step, you have completed {step_count} steps. \nBelow are the most recent {history_length} observations:\n[{history}]\nYou are currently at step {current_step}. Your current observation is: [{current_observation}]\nMax response length: {max_response_length} words (tokens).\n";
    let t = translate(template, &vars(Manager::Step))
        .map_err(|e| e.text)
        .unwrap();
    let history = vec![
        turn(2, "o2", "<answer>Up</answer>", "0"),
        turn(3, "o3", "<answer>Left</answer>", "-0.1"),
    ];
    assert_eq!(
        render(&t.text, 3, "o4", history),
        "## Env Instruction: Rules.\nPrior to this step, you have completed 3 steps. \nBelow are the most recent 2 observations:\n[(step: 2, observation: o2, action: <answer>Up</answer>, reward: 0), (step: 3, observation: o3, action: <answer>Left</answer>, reward: -0.1)]\nYou are currently at step 4. Your current observation is: [o4]\nMax response length: 64 words (tokens).\n"
    );
}

#[test]
fn step_concat_template_joins_observations() {
    // qwen3_agentic_gem's template: history = earlier observations joined by newlines,
    // current_observation = the observation, a newline and GEM's suffix.
    let template = "You are playing language games.\nObservation:\n{history}\n{current_observation}\nPlease reason step by step, and put your final answer within \\\\boxed{{}}.\n";
    let t = translate(template, &vars(Manager::StepConcat))
        .map_err(|e| e.text)
        .unwrap();
    let history = vec![turn(1, "o1", "a1", "0"), turn(2, "o2", "a2", "0")];
    assert_eq!(
        render(&t.text, 2, "o3", history),
        "You are playing language games.\nObservation:\no1\no2\no3\n\nPlease reason step by step, and put your final answer within \\\\boxed{}.\n"
    );
}

#[test]
fn unknown_fields_and_bad_braces_are_refused() {
    let err = translate("{observation} {history}", &vars(Manager::Trajectory))
        .err()
        .unwrap();
    assert!(
        err.text.contains("`{history}`") && err.text.contains("KeyError"),
        "{}",
        err.text
    );
    let err = translate("{observation:>4}", &vars(Manager::Trajectory))
        .err()
        .unwrap();
    assert!(err.text.contains("format specs"), "{}", err.text);
    let err = translate("a } b", &vars(Manager::Trajectory))
        .err()
        .unwrap();
    assert!(err.text.contains("unmatched brace"), "{}", err.text);
    let no_limit = Vars {
        max_tokens_per_step: None,
        ..vars(Manager::Trajectory)
    };
    let err = translate("{max_response_length}", &no_limit).err().unwrap();
    assert!(err.text.contains("max_tokens_per_step"), "{}", err.text);
}
