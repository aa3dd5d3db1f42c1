//! WebShop (Yao et al. 2022, princeton-nlp/WebShop): shop for a product that fits an
//! instruction by searching, browsing results, opening items, choosing options and buying.
//!
//! - [`config`]: `WebShop(..)`, every field defaulted; [`env`](mod@env): the [`WebShop`] env.
//! - [`pages`]: the pages, their clickables and WebShop's `simple` text observations.
//! - [`reward`]: WebShop's purchase reward and its parts; [`text_match`]: the fuzzy
//!   matching it uses.
//! - [`product`]: a product and a goal; [`catalog`]: the catalog shared by all envs of
//!   one source;
//!   [`generator`] (with [`vocabulary`]): a seeded generated catalog and its instructions;
//!   [`loader`]: WebShop's own JSON files; [`search`]: the tantivy BM25 index, searched
//!   by [`max_score`], with [`recent`] answers kept.
//! - [`scripted`]: the scripted expert and the random policy the tests and bench play.

pub mod catalog;
pub mod config;
pub mod env;
pub mod generator;
pub mod loader;
pub mod max_score;
pub mod pages;
pub mod product;
pub mod recent;
pub mod reward;
pub mod scripted;
pub mod search;
pub mod text_match;
pub mod vocabulary;

pub use config::{CatalogSource, WebShopConfig};
pub use env::WebShop;
