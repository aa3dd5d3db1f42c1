//! WebShop's settings: `WebShop()`, `WebShop(catalog: Generated(products: 100000, seed: 3))`
//! or `WebShop(catalog: Files(products: "data/items_shuffle_1000.json", attributes:
//! "data/items_ins_v2_1000.json", human_instructions: "data/items_human_ins.json"))`.

use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;

use crate::error::EnvError;
use crate::webshop::catalog::{shared_catalog, Catalog, GoalStore, ProductStore};
use crate::webshop::generator::CatalogGenerator;
use crate::webshop::loader;

/// Most products a generated catalog may have.
pub const MAX_GENERATED_PRODUCTS: usize = 5_000_000;
/// Most turns an episode may be given.
pub const MAX_TURNS: usize = 1000;

fn default_products() -> usize {
    1000
}

/// Where the shop's products and instructions come from.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum CatalogSource {
    /// A catalog generated from `seed` (module `generator`): `products` products
    /// (1..=5,000,000, default 1000; seed default 0) and one instruction per reset seed.
    Generated {
        #[serde(default = "default_products")]
        products: usize,
        #[serde(default)]
        seed: u64,
    },
    /// WebShop's own JSON files (module `loader`); paths relative to where roll-flow runs.
    /// Human instructions when `human_instructions` is given, else the attributes file's
    /// synthetic ones; `limit` keeps the file's first products (WebShop's `num_products`).
    Files {
        products: PathBuf,
        attributes: PathBuf,
        #[serde(default)]
        human_instructions: Option<PathBuf>,
        #[serde(default)]
        limit: Option<usize>,
    },
}

impl Default for CatalogSource {
    fn default() -> Self {
        CatalogSource::Generated {
            products: default_products(),
            seed: 0,
        }
    }
}

/// `WebShop(catalog: Generated(products: 1000, seed: 0), max_turns: 15, show_actions: true,
/// show_attrs: false, format_penalty: 0.0)`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebShopConfig {
    /// The products and instructions. Default `Generated(products: 1000, seed: 0)`.
    pub catalog: CatalogSource,
    /// Actions per episode before truncation (verl-agent's WebShop: 15). Default 15.
    pub max_turns: usize,
    /// End each observation with the page's admissible actions, as verl-agent's prompt
    /// lists them. Default true.
    pub show_actions: bool,
    /// Show the item's `Attributes` page (WebShop's `show_attrs`). Default false.
    pub show_attrs: bool,
    /// Reward of a reply that is not an action the page accepts (no `<answer>` tag, an
    /// unknown button). WebShop answers such actions with nothing: reward 0, the same
    /// page. Default 0.
    pub format_penalty: f32,
}

impl Default for WebShopConfig {
    fn default() -> Self {
        WebShopConfig {
            catalog: CatalogSource::default(),
            max_turns: 15,
            show_actions: true,
            show_attrs: false,
            format_penalty: 0.0,
        }
    }
}

fn invalid(field: &'static str, reason: String) -> EnvError {
    EnvError::InvalidConfig {
        env: "WebShop",
        field,
        reason,
    }
}

impl WebShopConfig {
    /// Checks every parameter, and that the data files exist.
    pub fn validate(&self) -> Result<(), EnvError> {
        match &self.catalog {
            CatalogSource::Generated { products, .. } => {
                if !(1..=MAX_GENERATED_PRODUCTS).contains(products) {
                    return Err(invalid(
                        "catalog",
                        format!("products {products} is not in 1..={MAX_GENERATED_PRODUCTS}"),
                    ));
                }
            }
            CatalogSource::Files {
                products,
                attributes,
                human_instructions,
                limit,
            } => {
                let files = [
                    Some(products),
                    Some(attributes),
                    human_instructions.as_ref(),
                ];
                for path in files.into_iter().flatten() {
                    if !path.is_file() {
                        return Err(invalid(
                            "catalog",
                            format!(
                                "{} is not a file (paths are relative to where roll-flow runs)",
                                path.display()
                            ),
                        ));
                    }
                }
                if *limit == Some(0) {
                    return Err(invalid("catalog", "limit must be at least 1".into()));
                }
            }
        }
        if !(1..=MAX_TURNS).contains(&self.max_turns) {
            return Err(invalid(
                "max_turns",
                format!("{} is not in 1..={MAX_TURNS}", self.max_turns),
            ));
        }
        if !self.format_penalty.is_finite() {
            return Err(invalid("format_penalty", "must be finite".into()));
        }
        Ok(())
    }

    /// The catalog this config names: built on first use, then shared by every env of the
    /// process that names the same source.
    pub fn catalog(&self) -> Result<Arc<Catalog>, EnvError> {
        let key = format!("{:?}", self.catalog);
        shared_catalog(&key, || match &self.catalog {
            CatalogSource::Generated { products, seed } => Catalog::new(
                ProductStore::Generated(CatalogGenerator::new(*products, *seed)),
                GoalStore::Generated,
            ),
            CatalogSource::Files {
                products,
                attributes,
                human_instructions,
                limit,
            } => {
                let (products, goals) =
                    loader::load(products, attributes, human_instructions.as_deref(), *limit)?;
                Catalog::new(ProductStore::Stored(products), GoalStore::Listed(goals))
            }
        })
    }
}
