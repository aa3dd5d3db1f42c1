//! Scripted WebShop players, for tests and the bench: the expert, which knows the goal, a
//! random clicker, and WebShop's rule baseline (Yao et al. 2022, Table 2: search the
//! instruction, buy the first result; 45.6 score and 9.6% success on human goals).
//!
//! Each returns the next action text (`search[..]` / `click[..]`, without answer tags) for
//! the env's current page; [`play_episode`] plays one through [`Env::step`].

use rand::seq::IndexedRandom;
use rand::Rng;

use crate::env::Env;
use crate::error::EnvError;
use crate::webshop::env::WebShop;
use crate::webshop::pages::{Click, Page, RESULTS_PER_PAGE};
use crate::webshop::text_match::fuzzy_match;

/// The expert: search the instruction's words, page through the results to the target,
/// open it, choose each asked option (the value equal to it, else one WebShop would match),
/// buy. On a page it does not expect, it goes back to search.
pub fn expert_action(env: &WebShop) -> String {
    let (Some(goal), session) = (env.goal(), env.session()) else {
        return "click[back to search]".into();
    };
    let clickables = session.clickables(env.catalog());
    match session.page {
        Page::Search => format!("search[{}]", goal.instruction),
        Page::Results => {
            if session.shown_results().contains(&goal.target) {
                let asin = env.catalog().asin(goal.target).to_lowercase();
                format!("click[{asin}]")
            } else if session.results_page * RESULTS_PER_PAGE < session.results.len() {
                "click[next >]".into()
            } else {
                // Not found: the first result of this page.
                first_result(session.shown_results().first().copied(), env)
            }
        }
        Page::Item => {
            let chosen = session.chosen_values();
            let offered: Vec<&str> = clickables
                .iter()
                .filter(|(_, c)| matches!(c, Click::Choose { .. }))
                .map(|(text, _)| text.as_str())
                .collect();
            for wanted in &goal.options {
                if chosen.iter().any(|c| c == wanted) {
                    continue;
                }
                let pick = offered
                    .iter()
                    .find(|v| *v == wanted)
                    .or_else(|| offered.iter().find(|v| fuzzy_match(v, wanted)));
                if let Some(value) = pick {
                    if !chosen.contains(value) {
                        return format!("click[{value}]");
                    }
                }
            }
            "click[buy now]".into()
        }
        Page::Sub(_) | Page::Done => "click[< prev]".into(),
    }
}

fn first_result(row: Option<usize>, env: &WebShop) -> String {
    match row {
        Some(row) => format!(
            "click[{}]",
            env.catalog().products.get(row).asin.to_lowercase()
        ),
        None => "click[back to search]".into(),
    }
}

/// WebShop's rule baseline: search the instruction, open the first result, buy it.
pub fn rule_action(env: &WebShop) -> String {
    let Some(goal) = env.goal() else {
        return "click[back to search]".into();
    };
    let session = env.session();
    match session.page {
        Page::Search => format!("search[{}]", goal.instruction),
        Page::Results => first_result(session.results.first().copied(), env),
        _ => "click[buy now]".into(),
    }
}

/// A random player: on the search page it searches the instruction (a search needs words,
/// and a random one would find nothing); elsewhere it clicks a clickable of the page drawn
/// uniformly.
pub fn random_action(env: &WebShop, rng: &mut impl Rng) -> String {
    let session = env.session();
    if session.page == Page::Search {
        return rule_action(env);
    }
    let clickables = session.clickables(env.catalog());
    match clickables.choose(rng) {
        Some((text, _)) => format!("click[{text}]"),
        None => "click[back to search]".into(),
    }
}

/// How an episode went.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outcome {
    pub reward: f32,
    pub turns: usize,
    pub bought: bool,
}

/// Resets `env` with `seed` and plays `policy` until the episode ends.
pub fn play_episode(
    env: &mut WebShop,
    seed: u64,
    mut policy: impl FnMut(&WebShop) -> String,
) -> Result<Outcome, EnvError> {
    env.reset(seed)?;
    let mut outcome = Outcome {
        reward: 0.0,
        turns: 0,
        bought: false,
    };
    loop {
        let action = policy(env);
        let step = env.step(&format!("<answer>{action}</answer>"))?;
        outcome.reward += step.reward;
        outcome.turns += 1;
        if step.done() {
            outcome.bought = step.terminated;
            return Ok(outcome);
        }
    }
}
