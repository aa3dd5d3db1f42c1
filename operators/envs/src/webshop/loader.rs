//! Loads WebShop's own data files, as `load_products` and `get_goals` in
//! `web_agent_site/engine/{engine,goal}.py` read them:
//!
//! - the products file (`items_shuffle.json`, `items_shuffle_1000.json`): a JSON list of
//!   products with `asin`, `name` (the title), `full_description`, `small_description` (a
//!   string or a list: the bullet points), `pricing` (`"$12.99"`, `"$10.00 - $20.00"`; empty
//!   means $100), `customization_options` (option name → list of `{"value": ..}` or null),
//!   `query`, `category` and `product_category`. Products with an ASIN of `nan` or longer
//!   than 10 characters, and repeated ASINs, are skipped; option names and values are
//!   lower-cased and `/` in a value becomes ` | `; a price range charges a point drawn
//!   inside it (seeded by the ASIN here, Python's global RNG in WebShop).
//! - the attributes file (`items_ins_v2.json`, `items_ins_v2_1000.json`): ASIN →
//!   `{"attributes": [..], "instruction": .., "instruction_attributes": [..]}`; a product
//!   without attributes gets `DUMMY_ATTR`, as in WebShop.
//! - goals: with a human instructions file (`items_human_ins.json`: ASIN → list of
//!   `{"instruction", "instruction_attributes", "instruction_options"}`), one goal per
//!   human instruction with attributes (`get_human_goals`); without one, the synthetic
//!   goals of the attributes file: for each product with an instruction, one goal per
//!   combination of its option values (`get_synthetic_goals`). Both add WebShop's price cap
//!   ([`price_cap`]).
//!
//! WebShop draws an episode's goal by weight; roll-flow takes goal `draw(seed)` of the
//! list, so a seed always gives the same goal.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

use crate::error::EnvError;
use crate::webshop::generator::{price_cap, NO_PRICE_CAP};
use crate::webshop::product::{Goal, Product};

#[derive(Deserialize)]
#[serde(untagged)]
enum TextOrList {
    Text(String),
    List(Vec<String>),
}

#[derive(Deserialize)]
struct RawOptionValue {
    value: String,
}

#[derive(Deserialize)]
struct RawProduct {
    asin: Option<String>,
    name: Option<String>,
    #[serde(default)]
    full_description: Option<String>,
    #[serde(default)]
    small_description: Option<TextOrList>,
    #[serde(default)]
    pricing: Option<String>,
    #[serde(default)]
    customization_options: Option<BTreeMap<String, Option<Vec<RawOptionValue>>>>,
    query: Option<String>,
    category: Option<String>,
    product_category: Option<String>,
}

#[derive(Deserialize, Default)]
struct RawAttributes {
    #[serde(default)]
    attributes: Option<Vec<String>>,
    #[serde(default)]
    instruction: Option<String>,
    #[serde(default)]
    instruction_attributes: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct RawHumanInstruction {
    instruction: String,
    #[serde(default)]
    instruction_attributes: Vec<String>,
    #[serde(default)]
    instruction_options: Vec<String>,
}

fn load_error(path: &Path, reason: impl std::fmt::Display) -> EnvError {
    EnvError::Data {
        env: "WebShop",
        reason: format!("{}: {reason}", path.display()),
    }
}

/// Reads a JSON file; `what` names the WebShop file and `shape` what it holds.
fn read_json<T: for<'de> Deserialize<'de>>(
    path: &Path,
    what: &str,
    shape: &str,
) -> Result<T, EnvError> {
    let bytes = std::fs::read(path).map_err(|e| load_error(path, e))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| load_error(path, format!("not a WebShop {what} file ({shape}): {e}")))
}

/// A float as Python's `str` writes it (`100.0`, `12.99`).
fn python_float(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e16 {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

/// WebShop's price parse: the numbers after each `$`, digits and dots kept; the charged
/// price and the tag the pages show.
fn parse_pricing(pricing: Option<&str>, rng: &mut ChaCha8Rng) -> Result<(f64, String), String> {
    let text = pricing.unwrap_or("");
    let numbers: Vec<f64> = text
        .split('$')
        .skip(1)
        .map(|part| {
            let kept: String = part
                .chars()
                .filter(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            kept.parse::<f64>()
                .map_err(|_| format!("pricing `{text}`: `{}` is not a price", part.trim()))
        })
        .collect::<Result<_, _>>()?;
    Ok(match numbers.as_slice() {
        [] => (100.0, "$100.0".to_string()),
        [one] => (*one, format!("${}", python_float(*one))),
        [lo, hi, ..] => {
            use rand::Rng;
            let (a, b) = if lo <= hi { (*lo, *hi) } else { (*hi, *lo) };
            let price = if a < b { rng.random_range(a..b) } else { a };
            (
                price,
                format!("${} to ${}", python_float(*lo), python_float(*hi)),
            )
        }
    })
}

fn seed_of(asin: &str) -> u64 {
    crate::anchor::observation_hash(asin)
}

fn convert(
    raw: RawProduct,
    i: usize,
    attributes: &HashMap<String, RawAttributes>,
) -> Result<Option<Product>, String> {
    let Some(asin) = raw.asin else {
        return Err(format!("product #{i} has no `asin`"));
    };
    if asin == "nan" || asin.chars().count() > 10 {
        return Ok(None);
    }
    let missing = |field: &str| format!("product #{i} ({asin}) has no `{field}`");
    let title = raw.name.ok_or_else(|| missing("name"))?;
    let query = raw.query.ok_or_else(|| missing("query"))?;
    let category = raw.category.ok_or_else(|| missing("category"))?;
    let product_category = raw
        .product_category
        .ok_or_else(|| missing("product_category"))?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed_of(&asin));
    let (price, price_tag) = parse_pricing(raw.pricing.as_deref(), &mut rng)
        .map_err(|e| format!("product #{i} ({asin}): {e}"))?;
    let bullet_points = match raw.small_description {
        None => vec![String::new()],
        Some(TextOrList::Text(t)) => vec![t],
        Some(TextOrList::List(list)) if list.is_empty() => vec![String::new()],
        Some(TextOrList::List(list)) => list,
    };
    let options = raw
        .customization_options
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(name, values)| {
            let values: Vec<String> = values?
                .into_iter()
                .map(|v| v.value.trim().replace('/', " | ").to_lowercase())
                .collect();
            Some((name.to_lowercase(), values))
        })
        .collect();
    let attributes = attributes
        .get(&asin)
        .and_then(|a| a.attributes.clone())
        .unwrap_or_else(|| vec!["DUMMY_ATTR".to_string()]);
    Ok(Some(Product {
        asin,
        title,
        query: query.trim().to_lowercase(),
        category,
        product_category,
        description: raw.full_description.unwrap_or_default(),
        bullet_points,
        attributes,
        options,
        price,
        price_tag,
    }))
}

/// The price cap and its text for a goal on `product`.
fn cap_for(product: &Product, rng: &mut ChaCha8Rng) -> (f64, String) {
    match price_cap(product.price, rng) {
        Some(cap) => (cap, format!(", and price lower than {cap:.2} dollars")),
        None => (NO_PRICE_CAP, String::new()),
    }
}

fn goal(
    row: usize,
    product: &Product,
    instruction: String,
    attributes: Vec<String>,
    options: Vec<String>,
    cap: f64,
) -> Goal {
    Goal {
        target: row,
        instruction,
        attributes,
        options,
        price_upper: cap,
        query: product.query.clone(),
        product_category: product.product_category.clone(),
        name: product.title.clone(),
    }
}

/// Every combination of one value per option, options in name order.
fn option_combinations(options: &[(String, Vec<String>)]) -> Vec<Vec<(String, String)>> {
    let mut sorted: Vec<&(String, Vec<String>)> = options.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for (name, values) in sorted {
        combos = combos
            .into_iter()
            .flat_map(|combo| {
                values.iter().map(move |v| {
                    let mut next = combo.clone();
                    next.push((name.clone(), v.clone()));
                    next
                })
            })
            .collect();
    }
    combos
}

/// Products and goals from WebShop's files (see the module doc); `limit` keeps the first
/// products of the file, as WebShop's `num_products`.
pub fn load(
    products_file: &Path,
    attributes_file: &Path,
    human_instructions_file: Option<&Path>,
    limit: Option<usize>,
) -> Result<(Vec<Product>, Vec<Goal>), EnvError> {
    let mut raw: Vec<RawProduct> = read_json(products_file, "products", "a JSON list of products")?;
    let attributes: HashMap<String, RawAttributes> = read_json(
        attributes_file,
        "attributes",
        "an object: ASIN → attributes",
    )?;
    if let Some(limit) = limit {
        raw.truncate(limit);
    }
    let mut seen = HashSet::new();
    let mut products = Vec::new();
    for (i, p) in raw.into_iter().enumerate() {
        let converted = convert(p, i, &attributes).map_err(|e| load_error(products_file, e))?;
        if let Some(product) = converted {
            if seen.insert(product.asin.clone()) {
                products.push(product);
            }
        }
    }
    let mut goals = Vec::new();
    if let Some(path) = human_instructions_file {
        let human: HashMap<String, Vec<RawHumanInstruction>> =
            read_json(path, "human instructions", "an object: ASIN → instructions")?;
        for (row, product) in products.iter().enumerate() {
            let mut rng = ChaCha8Rng::seed_from_u64(seed_of(&product.asin) ^ 1);
            for ins in human.get(&product.asin).into_iter().flatten() {
                if ins.instruction_attributes.is_empty() {
                    continue;
                }
                let (cap, price_text) = cap_for(product, &mut rng);
                let text = format!("{}{price_text}", ins.instruction.trim_matches('.'));
                goals.push(goal(
                    row,
                    product,
                    text,
                    ins.instruction_attributes.clone(),
                    ins.instruction_options.clone(),
                    cap,
                ));
            }
        }
    } else {
        for (row, product) in products.iter().enumerate() {
            let Some(info) = attributes.get(&product.asin) else {
                continue;
            };
            let (Some(base), Some(asked)) = (&info.instruction, &info.instruction_attributes)
            else {
                continue;
            };
            if asked.is_empty() {
                return Err(load_error(
                    attributes_file,
                    format!(
                        "{}: an instruction without `instruction_attributes`",
                        product.asin
                    ),
                ));
            }
            let mut rng = ChaCha8Rng::seed_from_u64(seed_of(&product.asin) ^ 2);
            let (cap, price_text) = cap_for(product, &mut rng);
            for combo in option_combinations(&product.options) {
                let listed: Vec<String> = combo.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                let option_text = if listed.is_empty() {
                    String::new()
                } else {
                    format!(" with {}", listed.join(", and "))
                };
                let values = combo.into_iter().map(|(_, v)| v).collect();
                goals.push(goal(
                    row,
                    product,
                    format!("{base}{option_text}{price_text}"),
                    asked.clone(),
                    values,
                    cap,
                ));
            }
        }
    }
    if products.is_empty() {
        return Err(load_error(products_file, "no usable product"));
    }
    if goals.is_empty() {
        return Err(load_error(
            human_instructions_file.unwrap_or(attributes_file),
            "no goal: no product of the products file has an instruction with attributes",
        ));
    }
    Ok((products, goals))
}

#[cfg(test)]
#[path = "loader_tests.rs"]
mod tests;
