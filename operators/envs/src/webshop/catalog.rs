//! The [`Catalog`]: a shop's products ([`ProductStore`]), its goals ([`GoalStore`]) and the
//! search index over the products.
//!
//! A catalog is built once per source and shared read-only (`Arc`) by every env instance
//! that names the same source ([`shared_catalog`]): a pipeline's 256 envs search one index.
//! A generated catalog stores no product text: product `i` is generated again from the
//! catalog seed and `i` when a page shows it ([`ProductStore::Generated`]), so a million
//! products cost the search index and nothing else.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::EnvError;
use crate::webshop::generator::CatalogGenerator;
use crate::webshop::product::{Goal, Product};
use crate::webshop::search::{index_key, indexed_text, SearchIndex};

/// Where products live: stored (loaded from WebShop's files) or generated on demand.
pub enum ProductStore {
    Stored(Vec<Product>),
    Generated(CatalogGenerator),
}

impl ProductStore {
    /// Number of products.
    pub fn len(&self) -> usize {
        match self {
            ProductStore::Stored(products) => products.len(),
            ProductStore::Generated(generator) => generator.products(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Product `row` (`row < len()`).
    pub fn get(&self, row: usize) -> Cow<'_, Product> {
        match self {
            ProductStore::Stored(products) => Cow::Borrowed(&products[row]),
            ProductStore::Generated(generator) => Cow::Owned(generator.product(row)),
        }
    }
}

/// Where goals come from: listed (WebShop's instruction files) or generated per seed.
pub enum GoalStore {
    Listed(Vec<Goal>),
    Generated,
}

/// Products, goals and the BM25 index over the products.
pub struct Catalog {
    pub products: ProductStore,
    pub goals: GoalStore,
    pub index: SearchIndex,
    /// Product row by lower-case ASIN (stored catalogs; generated ASINs encode the row).
    asins: HashMap<String, usize>,
}

impl Catalog {
    /// Indexes `products` for search and keeps them with their goals.
    pub fn new(products: ProductStore, goals: GoalStore) -> Result<Catalog, EnvError> {
        let index = SearchIndex::build(
            index_order(&products)
                .into_iter()
                .map(|r| (r, indexed_text(&products.get(r)))),
        )?;
        let asins = match &products {
            ProductStore::Stored(list) => list
                .iter()
                .enumerate()
                .map(|(row, p)| (p.asin.to_lowercase(), row))
                .collect(),
            ProductStore::Generated(_) => HashMap::new(),
        };
        Ok(Catalog {
            products,
            goals,
            index,
            asins,
        })
    }

    /// The ASIN of product `row`, without generating the whole product.
    pub fn asin(&self, row: usize) -> String {
        match &self.products {
            ProductStore::Stored(products) => products[row].asin.clone(),
            ProductStore::Generated(generator) => generator.asin(row),
        }
    }

    /// The row of the product whose ASIN is `asin` (any case).
    pub fn row_of(&self, asin: &str) -> Option<usize> {
        match &self.products {
            ProductStore::Stored(_) => self.asins.get(&asin.to_lowercase()).copied(),
            ProductStore::Generated(generator) => generator.row_of(asin),
        }
    }

    /// The goal of an episode reset with `seed`: a listed goal drawn by the seed, or one
    /// generated from a target product drawn by the seed.
    pub fn goal(&self, seed: u64) -> Goal {
        match (&self.goals, &self.products) {
            (GoalStore::Listed(goals), _) => goals[draw(seed, goals.len())].clone(),
            (GoalStore::Generated, ProductStore::Generated(generator)) => generator.goal(seed),
            (GoalStore::Generated, ProductStore::Stored(_)) => {
                unreachable!("stored catalogs list their goals (the loader checks)")
            }
        }
    }

    /// Number of listed goals (`None` for generated goals: one per seed).
    pub fn listed_goals(&self) -> Option<usize> {
        match &self.goals {
            GoalStore::Listed(goals) => Some(goals.len()),
            GoalStore::Generated => None,
        }
    }
}

/// The rows in the search index's order: by [`index_key`] (query, attributes, options),
/// then by row.
pub fn index_order(products: &ProductStore) -> Vec<usize> {
    let mut keyed: Vec<(String, usize)> = (0..products.len())
        .map(|r| (index_key(&products.get(r)), r))
        .collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, r)| r).collect()
}

/// A uniform index below `n` (> 0) from a seed: SplitMix64 of the seed, reduced.
pub fn draw(seed: u64, n: usize) -> usize {
    let z = roll_flow_engine::stable_hash::splitmix64(seed);
    ((z as u128 * n as u128) >> 64) as usize
}

type CatalogCache = Mutex<HashMap<String, Arc<Catalog>>>;

/// The catalog of `key` (a description of its source), built by `build` on first use and
/// shared by every later caller: one index per source per process. A failed build is not
/// cached, so the next caller sees the same error.
pub fn shared_catalog(
    key: &str,
    build: impl FnOnce() -> Result<Catalog, EnvError>,
) -> Result<Arc<Catalog>, EnvError> {
    static CACHE: OnceLock<CatalogCache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    // Building under the lock makes concurrent first users wait for one build instead of
    // each building their own; a poisoned lock only means another builder panicked.
    let mut catalogs = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(catalog) = catalogs.get(key) {
        return Ok(catalog.clone());
    }
    let catalog = Arc::new(build()?);
    catalogs.insert(key.to_string(), catalog.clone());
    Ok(catalog)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_order_groups_products_by_query_attributes_and_options() {
        let products = ProductStore::Generated(CatalogGenerator::new(300, 5));
        let order = index_order(&products);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..300).collect::<Vec<_>>());
        for pair in order.windows(2) {
            let (a, b) = (products.get(pair[0]), products.get(pair[1]));
            assert!(a.query <= b.query, "{pair:?}: {} then {}", a.query, b.query);
            let (ka, kb) = (index_key(&a), index_key(&b));
            assert!(ka < kb || (ka == kb && pair[0] < pair[1]), "{pair:?}");
        }
    }
}
