//! ROLL's `env_type: webshop` (`roll/pipeline/agentic/env/webshop/env.py`, on
//! webshop-minimal) as roll-flow's `WebShop(..)` (operators/envs/src/webshop/config.rs).
//!
//! | ROLL `env_config` key (ROLL's default) | roll-flow |
//! |---|---|
//! | `max_steps` (10), the tag's `max_steps` | `max_turns` (the smaller) |
//! | `format_penalty` (0.0) | `format_penalty` |
//! | `show_attrs` (false) | `show_attrs` |
//! | `observation_mode` (`text`) | text is what roll-flow shows; other modes reported |
//! | `num_products` (all) | `catalog: Generated(products: N)` (1000 when absent) |
//! | `file_path`, `human_goals`, `limit_goals`, `filter_goals`, `server` | reported |
//! | `special_token_list` | not needed: replies are decoded without special tokens |
//!
//! ROLL plays webshop-minimal's own product files; the import writes roll-flow's generated
//! catalog of the same size and says so (WebShop's files load with `catalog: Files(..)`).

use super::config_reader::ConfigReader;
use super::import_error::ImportError;
use super::roll_keys::NoticeKind;
use super::yaml_value::Value;

/// ROLL's WebShopEnv `max_steps` default.
const ROLL_MAX_STEPS: u64 = 10;
/// webshop-minimal's default data: its 1,000-product files.
const ROLL_PRODUCTS: u64 = 1000;

/// The `WebShop(..)` env of the tag whose env config is at `config`; `manager_steps` is the
/// tag's own `max_steps` (the env manager's turn limit).
pub fn webshop_env(
    r: &mut ConfigReader,
    config: &str,
    manager_steps: Option<u64>,
    format_penalty: f64,
) -> Result<String, ImportError> {
    let env_steps = r
        .count(&format!("{config}.max_steps"))?
        .unwrap_or(ROLL_MAX_STEPS);
    let max_turns = manager_steps.map_or(env_steps, |m| m.min(env_steps));
    let mode_key = format!("{config}.observation_mode");
    if let Some(mode) = r.text(&mode_key)?.filter(|m| m != "text") {
        r.notice(
            NoticeKind::NotSupported,
            &mode_key,
            format!("`{mode}`: roll-flow shows WebShop's text pages (`text`)"),
        );
    }
    let products = r
        .count(&format!("{config}.num_products"))?
        .unwrap_or(ROLL_PRODUCTS);
    r.notice(
        NoticeKind::NotSupported,
        config,
        format!("ROLL plays webshop-minimal's product files; wrote roll-flow's generated catalog of {products} products (WebShop's own files: `catalog: Files(products: \"items_shuffle_1000.json\", attributes: \"items_ins_v2_1000.json\")`)"),
    );
    for (key, default) in [
        ("file_path", Value::Null),
        ("human_goals", Value::Bool(false)),
        ("limit_goals", Value::Int(-1)),
        ("filter_goals", Value::Null),
        ("server", Value::Null),
    ] {
        r.unsupported_unless(
            &format!("{config}.{key}"),
            |v| *v == default,
            "webshop-minimal's data selection; roll-flow's catalog is generated",
        );
    }
    r.value(&format!("{config}.special_token_list"));
    let show_attrs = r.flag(&format!("{config}.show_attrs"))?.unwrap_or(false);
    Ok(format!(
        "WebShop(catalog: Generated(products: {products}), max_turns: {max_turns}, show_attrs: {show_attrs}, format_penalty: {format_penalty:?})"
    ))
}
