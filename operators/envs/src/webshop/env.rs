//! [`WebShop`]: one shopping episode on a shared [`Catalog`], as WebShop's text env plays
//! it (`web_agent_site/envs/web_agent_text_env.py`).
//!
//! - Reset draws the goal of the seed and shows the search page; the instruction (and the
//!   reset line of `roll-flow play`) carries the goal's text.
//! - A reply is `<answer>search[query]</answer>` or `<answer>click[button]</answer>`.
//!   Parsing follows WebShop's `parse_action` (`(.+)\[(.+)\]`: the name before the last
//!   `[` that has a `]` after it, the argument up to the last `]`), the argument
//!   lower-cased. A search with words runs from any page, as in WebShop; a click must name
//!   a clickable of the page ([`Session::clickables`]). Anything else changes nothing and
//!   earns `format_penalty` (WebShop: nothing, reward 0).
//! - `buy now` ends the episode with WebShop's reward ([`purchase_reward`]); its parts are
//!   the step's `info.metrics` (`r_type`, `r_att`, `r_option`, `r_price`, `title_score`)
//!   and success is a reward of 1.

use std::sync::Arc;

use crate::action::extract_answer;
use crate::env::{Env, EnvInfo, Reset, StepMetrics, StepResult};
use crate::error::EnvError;
use crate::render::frame::Frame;
use crate::webshop::catalog::Catalog;
use crate::webshop::config::WebShopConfig;
use crate::webshop::pages::{Click, Page, Session};
use crate::webshop::product::Goal;
use crate::webshop::reward::{purchase_reward, RewardParts};

/// What the search box stands for in the admissible actions.
pub const SEARCH_ACTION: &str = "search[<your query>]";

/// WebShop's `parse_action`: `(name, argument)`, or `None` without a bracketed argument.
pub fn parse_action(text: &str) -> Option<(&str, &str)> {
    let close = text.rfind(']')?;
    let open = text[..close].rfind('[')?;
    if open == 0 || open + 1 == close {
        return None;
    }
    Some((text[..open].trim(), &text[open + 1..close]))
}

impl WebShopConfig {
    /// A validated env on the shared catalog ([`WebShopConfig::catalog`]).
    pub fn build(&self) -> Result<WebShop, EnvError> {
        self.validate()?;
        Ok(WebShop::new(self.clone(), self.catalog()?))
    }
}

/// A WebShop episode.
pub struct WebShop {
    config: WebShopConfig,
    catalog: Arc<Catalog>,
    goal: Option<Goal>,
    session: Session,
    turns: usize,
}

impl WebShop {
    /// An env on `catalog` (call `reset` before `step`).
    pub fn new(config: WebShopConfig, catalog: Arc<Catalog>) -> WebShop {
        let session = Session::start(config.show_attrs);
        WebShop {
            config,
            catalog,
            goal: None,
            session,
            turns: 0,
        }
    }

    /// The shared catalog.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// The episode's goal (after `reset`).
    pub fn goal(&self) -> Option<&Goal> {
        self.goal.as_ref()
    }

    /// The browsing session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The purchase's reward parts, once bought.
    pub fn reward_parts(&self) -> Option<RewardParts> {
        self.session.reward
    }

    /// The page's admissible actions: `search[<your query>]` on the search page, then
    /// `click[..]` for each clickable (verl-agent's list).
    pub fn admissible_actions(&self) -> Vec<String> {
        let mut actions = Vec::new();
        if self.session.has_search_bar() {
            actions.push(SEARCH_ACTION.to_string());
        }
        let clicks = self.session.clickables(&self.catalog);
        actions.extend(clicks.into_iter().map(|(text, _)| format!("click[{text}]")));
        actions
    }

    /// Plays one action (`search[..]`/`click[..]`, without the answer tags); returns the
    /// reward and whether the page accepted it.
    fn act(&mut self, action: &str) -> Result<(f32, bool), EnvError> {
        let Some((name, arg)) = parse_action(action.trim()) else {
            return Ok((self.config.format_penalty, false));
        };
        let arg = arg.to_lowercase();
        match name.to_ascii_lowercase().as_str() {
            "search" if !arg.trim().is_empty() => {
                let results = self.catalog.index.search(&arg)?;
                self.session.show_results(arg, results, 1);
                Ok((0.0, true))
            }
            "click" if arg != "search" => {
                let clicked = self
                    .session
                    .clickables(&self.catalog)
                    .into_iter()
                    .find(|(text, _)| *text == arg);
                let Some((_, click)) = clicked else {
                    return Ok((self.config.format_penalty, false));
                };
                let buying = click == Click::Buy;
                self.session.apply(click);
                if !buying {
                    return Ok((0.0, true));
                }
                let (goal, row) = match (&self.goal, self.session.item) {
                    (Some(goal), Some(row)) => (goal, row),
                    _ => unreachable!("buy now is only on an item page of a reset episode"),
                };
                let product = self.catalog.products.get(row);
                let parts =
                    purchase_reward(&product, goal, product.price, &self.session.chosen_values());
                self.session.reward = Some(parts);
                Ok((parts.total as f32, true))
            }
            _ => Ok((self.config.format_penalty, false)),
        }
    }

    fn metrics(parts: &RewardParts) -> StepMetrics {
        let mut m = StepMetrics::default();
        m.push("r_type", parts.r_type as f32);
        if let Some(r) = parts.r_att {
            m.push("r_att", r as f32);
        }
        if let Some(r) = parts.r_option {
            m.push("r_option", r as f32);
        }
        m.push("r_price", f32::from(u8::from(parts.r_price)));
        m.push("title_score", parts.title_score as f32);
        m
    }
}

impl Env for WebShop {
    fn name(&self) -> &'static str {
        "WebShop"
    }

    fn reset(&mut self, seed: u64) -> Result<Reset, EnvError> {
        let goal = self.catalog.goal(seed);
        let instruction = format!(
            "You are shopping on WebShop. Your task: {}. Each turn, give one action inside \
             <answer></answer>: search[your query] on the search page, or click[button] with \
             a button, product ID or option value the page shows (back to search, next >, \
             < prev, description, features, reviews, buy now). Choose the options the task \
             asks for, then buy now: buying ends the episode, and the reward says how well \
             the product, its options and its price fit the task (1 is a perfect purchase).",
            goal.instruction
        );
        self.goal = Some(goal);
        self.session = Session::start(self.config.show_attrs);
        self.turns = 0;
        Ok(Reset {
            observation: self.observation(),
            instruction,
        })
    }

    fn step(&mut self, action_text: &str) -> Result<StepResult, EnvError> {
        if self.goal.is_none() {
            return Err(EnvError::NotReset("WebShop"));
        }
        if self.session.page == Page::Done || self.turns >= self.config.max_turns {
            return Err(EnvError::EpisodeOver("WebShop"));
        }
        self.turns += 1;
        let before = self.session.clone();
        let (reward, valid) = match extract_answer(action_text) {
            Some(answer) => self.act(answer)?,
            None => (self.config.format_penalty, false),
        };
        let terminated = self.session.page == Page::Done;
        let parts = self.session.reward.filter(|_| terminated);
        Ok(StepResult {
            observation: self.observation(),
            reward,
            terminated,
            truncated: !terminated && self.turns >= self.config.max_turns,
            info: EnvInfo {
                success: parts.is_some_and(|p| p.total >= 1.0),
                action_is_valid: valid,
                action_is_effective: self.session != before,
                format_penalty: if valid {
                    0.0
                } else {
                    self.config.format_penalty
                },
                metrics: parts.as_ref().map(Self::metrics).unwrap_or_default(),
            },
        })
    }

    fn observation(&self) -> String {
        let Some(goal) = &self.goal else {
            return String::new();
        };
        let page = self.session.render(&self.catalog, &goal.instruction);
        if !self.config.show_actions || self.session.page == Page::Done {
            return page;
        }
        format!(
            "{page}\nAvailable actions: {}",
            self.admissible_actions().join(", ")
        )
    }

    /// WebShop is text only: no frame (eval renders keep the transcript).
    fn render_frame(&self) -> Result<Frame, EnvError> {
        Ok(Frame::empty())
    }

    fn default_max_turns(&self) -> usize {
        self.config.max_turns
    }

    fn valid_actions(&self) -> Vec<String> {
        self.admissible_actions()
    }
}

#[cfg(test)]
#[path = "env_tests.rs"]
mod tests;
