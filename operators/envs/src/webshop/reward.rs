//! WebShop's reward for a purchase (Yao et al. 2022, eq. 1; `get_reward` and its parts in
//! `web_agent_site/engine/goal.py` of princeton-nlp/WebShop):
//!
//! `r = r_type · (n_att + n_opt + 1[price ≤ price_upper]) / (|U_att| + |U_opt| + 1)`
//!
//! - `n_att` ([`attribute_reward`]): goal attributes matched by one of the product's
//!   attributes (token-set score above 85), or else found as a substring of its title,
//!   bullet points or description (lower-cased).
//! - `n_opt` ([`option_reward`]): goal option values matched (token-set score above 85,
//!   both sides passed through `normalize_color`) by one of the chosen option values. A
//!   goal without options has `r_option` = none and adds 0 to both sums.
//! - the price term: 1 when the charged price is at most the cap (equality counts).
//! - `r_type` ([`type_reward`]): 1 when the product's query equals the goal's, or their
//!   breadcrumbs share two parts or more, or the title score (shared name words over the
//!   goal name's words) is above 0.2; 0.5 when none of these holds; then 0.1 when the title
//!   score is below 0.1 and 0 when it is 0, whatever matched. A goal name with no words
//!   scores 0.2. The name words are [`content_words`] (WebShop uses spaCy's nouns).
//!
//! Success is a reward of exactly 1.

use serde::Serialize;

use crate::webshop::product::{Goal, Product};
use crate::webshop::text_match::{content_words, fuzzy_match, normalize_color};

/// The type reward and what it was made of (`get_type_reward`'s dict).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TypeReward {
    pub r_type: f64,
    pub query_match: bool,
    pub category_match: bool,
    pub title_score: f64,
}

/// Every part of a purchase's reward (`get_reward(..., verbose=True)`'s info, with counts).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RewardParts {
    /// The product-type factor.
    pub r_type: f64,
    pub query_match: bool,
    pub category_match: bool,
    pub title_score: f64,
    /// Fraction of the goal's attributes matched (`None` for a goal with none).
    pub r_att: Option<f64>,
    pub attributes_matched: usize,
    pub attributes_asked: usize,
    /// Fraction of the goal's options matched (`None` for a goal with none).
    pub r_option: Option<f64>,
    pub options_matched: usize,
    pub options_asked: usize,
    /// The price is at most the cap.
    pub r_price: bool,
    /// The reward.
    pub total: f64,
}

fn breadcrumb(text: &str) -> Vec<&str> {
    text.split('›').map(str::trim).collect()
}

/// `get_type_reward`: does the purchased product have the goal's type?
pub fn type_reward(purchased: &Product, goal: &Goal) -> TypeReward {
    let query_match = purchased.query == goal.query;
    let mine = breadcrumb(&purchased.product_category);
    let mut wanted = breadcrumb(&goal.product_category);
    wanted.sort_unstable();
    wanted.dedup();
    let shared = wanted.iter().filter(|part| mine.contains(part)).count();
    let category_match = shared >= 2;
    let desired = content_words(&goal.name);
    let title_score = if desired.is_empty() {
        0.2
    } else {
        let bought = content_words(&purchased.title);
        let common = desired.iter().filter(|w| bought.contains(w)).count();
        common as f64 / desired.len() as f64
    };
    let mut r_type = if query_match || category_match || title_score > 0.2 {
        1.0
    } else {
        0.5
    };
    if title_score < 0.1 {
        r_type = 0.1;
    }
    if title_score == 0.0 {
        r_type = 0.0;
    }
    TypeReward {
        r_type,
        query_match,
        category_match,
        title_score,
    }
}

/// `get_attribute_reward`: how many goal attributes the product has.
pub fn attribute_reward(purchased: &Product, goal_attributes: &[String]) -> usize {
    let title = purchased.title.to_lowercase();
    let bullets = purchased.bullet_points.join(" ").to_lowercase();
    let description = purchased.description.to_lowercase();
    goal_attributes
        .iter()
        .filter(|wanted| {
            purchased.attributes.iter().any(|a| fuzzy_match(a, wanted))
                || title.contains(wanted.as_str())
                || bullets.contains(wanted.as_str())
                || description.contains(wanted.as_str())
        })
        .count()
}

/// `get_option_reward`: how many goal option values the chosen values match.
pub fn option_reward(chosen: &[&str], goal_options: &[String]) -> usize {
    goal_options
        .iter()
        .filter(|wanted| {
            let wanted = normalize_color(wanted);
            chosen
                .iter()
                .any(|value| fuzzy_match(normalize_color(value), wanted))
        })
        .count()
}

fn fraction(matched: usize, asked: usize) -> Option<f64> {
    (asked > 0).then(|| matched as f64 / asked as f64)
}

/// `get_reward`: the reward of buying `purchased` at `price` with the option values
/// `chosen` for `goal`, with all its parts.
pub fn purchase_reward(
    purchased: &Product,
    goal: &Goal,
    price: f64,
    chosen: &[&str],
) -> RewardParts {
    let kind = type_reward(purchased, goal);
    let attributes_matched = attribute_reward(purchased, &goal.attributes);
    let options_matched = option_reward(chosen, &goal.options);
    let r_price = price <= goal.price_upper;
    let (attributes_asked, options_asked) = (goal.attributes.len(), goal.options.len());
    let matched = attributes_matched + options_matched + usize::from(r_price);
    let asked = attributes_asked + options_asked + 1;
    RewardParts {
        r_type: kind.r_type,
        query_match: kind.query_match,
        category_match: kind.category_match,
        title_score: kind.title_score,
        r_att: fraction(attributes_matched, attributes_asked),
        attributes_matched,
        attributes_asked,
        r_option: fraction(options_matched, options_asked),
        options_matched,
        options_asked,
        r_price,
        total: kind.r_type * matched as f64 / asked as f64,
    }
}

#[cfg(test)]
#[path = "reward_tests.rs"]
mod tests;
