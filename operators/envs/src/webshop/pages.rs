//! WebShop's pages and what clicking does, as the text env and its simulated server run
//! them (`web_agent_site/envs/web_agent_text_env.py`, `SimServer.receive`):
//!
//! - **search** (the start): a search box. **results**: `Back to Search`, `Page p (Total
//!   results: n)`, `< Prev` (past page 1), `Next >` (always, as WebShop's template), then ten
//!   products (ASIN link, title, price). **item**: `Back to Search`, `< Prev`, each option
//!   name with its values, title, price, rating, `Description`, `Features`, `Reviews`
//!   (`Attributes` when shown) and `Buy Now`. **sub-pages**: `Back to Search`, `< Prev` and
//!   the description, bullet points, reviews (none) or attributes. **done**: the purchase.
//! - Clickables are the page's buttons and product links, lower-cased, then the item's
//!   option values (`get_available_actions`); `search` is never clickable.
//! - `back to search` starts over (keywords, product and options cleared); `next >` and
//!   `< prev` on results change the page; `< prev` on an item returns to its results (the
//!   options are cleared, as every results page clears them) and on a sub-page to the
//!   item; a product link opens the item (options kept); an option value sets that
//!   option; `buy now` ends the episode.
//!
//! Observations are WebShop's `simple` text mode: the page's visible texts joined by
//! ` [SEP] `. The done page keeps only the purchase and the score (WebShop's also prints
//! hidden debugging fields).

use serde::Serialize;

use crate::webshop::catalog::Catalog;
use crate::webshop::reward::RewardParts;

/// WebShop's `PRODUCT_WINDOW`: products per results page.
pub const RESULTS_PER_PAGE: usize = 10;
/// Button texts as the pages show them.
pub const BACK_TO_SEARCH: &str = "Back to Search";
pub const NEXT_PAGE: &str = "Next >";
pub const PREV_PAGE: &str = "< Prev";
pub const BUY_NOW: &str = "Buy Now";

/// An item's sub-page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Detail {
    Description,
    Features,
    Reviews,
    Attributes,
}

impl Detail {
    pub const ALL: [Detail; 4] = [
        Detail::Description,
        Detail::Features,
        Detail::Reviews,
        Detail::Attributes,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Detail::Description => "Description",
            Detail::Features => "Features",
            Detail::Reviews => "Reviews",
            Detail::Attributes => "Attributes",
        }
    }
}

/// Which page the browser shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Page {
    Search,
    Results,
    Item,
    Sub(Detail),
    Done,
}

/// One shopping session: WebShop's `user_sessions[id]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    pub page: Page,
    /// The last search's words.
    pub keywords: String,
    /// The last search's products (rows), best first.
    pub results: Vec<usize>,
    /// The results page shown, from 1.
    pub results_page: usize,
    /// The open product.
    pub item: Option<usize>,
    /// Chosen options, name → value, in the order first chosen.
    pub options: Vec<(String, String)>,
    /// The purchase's reward, once bought.
    pub reward: Option<RewardParts>,
    /// Show the `Attributes` button (WebShop's `show_attrs`).
    pub show_attrs: bool,
}

/// What a click on the current page does.
#[derive(Clone, Debug, PartialEq)]
pub enum Click {
    BackToSearch,
    NextPage,
    PrevPage,
    /// A product link: the product's row.
    Open(usize),
    /// An option value of the open item.
    Choose {
        name: String,
        value: String,
    },
    Detail(Detail),
    Buy,
}

impl Session {
    /// A session on the search page.
    pub fn start(show_attrs: bool) -> Session {
        Session {
            page: Page::Search,
            keywords: String::new(),
            results: Vec::new(),
            results_page: 1,
            item: None,
            options: Vec::new(),
            reward: None,
            show_attrs,
        }
    }

    /// The rows shown on the current results page.
    pub fn shown_results(&self) -> &[usize] {
        let start = (self.results_page - 1) * RESULTS_PER_PAGE;
        let end = (start + RESULTS_PER_PAGE).min(self.results.len());
        self.results.get(start..end).unwrap_or(&[])
    }

    /// Whether the page has the search box.
    pub fn has_search_bar(&self) -> bool {
        self.page == Page::Search
    }

    /// The clickables of the page, each with what clicking it does, in WebShop's order:
    /// buttons, product links, then option values.
    pub fn clickables(&self, catalog: &Catalog) -> Vec<(String, Click)> {
        let mut out: Vec<(String, Click)> = Vec::new();
        let mut button = |text: &str, click: Click| out.push((text.to_lowercase(), click));
        match self.page {
            Page::Search | Page::Done => {}
            Page::Results => {
                button(BACK_TO_SEARCH, Click::BackToSearch);
                if self.results_page > 1 {
                    button(PREV_PAGE, Click::PrevPage);
                }
                button(NEXT_PAGE, Click::NextPage);
                for &row in self.shown_results() {
                    button(&catalog.asin(row), Click::Open(row));
                }
            }
            Page::Item => {
                button(BACK_TO_SEARCH, Click::BackToSearch);
                button(PREV_PAGE, Click::PrevPage);
                for detail in Detail::ALL {
                    if detail != Detail::Attributes || self.show_attrs {
                        button(detail.label(), Click::Detail(detail));
                    }
                }
                button(BUY_NOW, Click::Buy);
                if let Some(row) = self.item {
                    for (name, values) in &catalog.products.get(row).options {
                        for value in values {
                            let choose = Click::Choose {
                                name: name.clone(),
                                value: value.clone(),
                            };
                            out.push((value.clone(), choose));
                        }
                    }
                }
            }
            Page::Sub(_) => {
                button(BACK_TO_SEARCH, Click::BackToSearch);
                button(PREV_PAGE, Click::PrevPage);
            }
        }
        out
    }

    /// Shows the results of `keywords` (already searched: `results`) at `page`; every
    /// results page clears the open product and its options, as WebShop's does.
    pub fn show_results(&mut self, keywords: String, results: Vec<usize>, page: usize) {
        self.keywords = keywords;
        self.results = results;
        self.results_page = page;
        self.item = None;
        self.options.clear();
        self.page = Page::Results;
    }

    /// Applies a click that is not a purchase (the env prices purchases).
    pub fn apply(&mut self, click: Click) {
        match click {
            Click::BackToSearch => {
                let show_attrs = self.show_attrs;
                *self = Session::start(show_attrs);
            }
            Click::NextPage => self.results_page += 1,
            Click::PrevPage => match self.page {
                Page::Results => self.results_page -= 1,
                Page::Item => {
                    self.item = None;
                    self.options.clear();
                    self.page = Page::Results;
                }
                _ => self.page = Page::Item,
            },
            Click::Open(row) => {
                self.item = Some(row);
                self.page = Page::Item;
            }
            Click::Choose { name, value } => {
                match self.options.iter_mut().find(|(n, _)| *n == name) {
                    Some(slot) => slot.1 = value,
                    None => self.options.push((name, value)),
                }
                self.page = Page::Item;
            }
            Click::Detail(detail) => self.page = Page::Sub(detail),
            Click::Buy => self.page = Page::Done,
        }
    }

    /// The chosen option values, in the order chosen.
    pub fn chosen_values(&self) -> Vec<&str> {
        self.options.iter().map(|(_, v)| v.as_str()).collect()
    }

    /// The page as WebShop's `simple` text observation.
    pub fn render(&self, catalog: &Catalog, instruction: &str) -> String {
        let mut texts: Vec<String> = Vec::new();
        let mut put = |t: &str| texts.push(t.to_string());
        let header = |put: &mut dyn FnMut(&str)| {
            put("Instruction:");
            put(instruction);
            put(BACK_TO_SEARCH);
        };
        match self.page {
            Page::Search => {
                put("WebShop");
                put("Instruction:");
                put(instruction);
                put("Search");
            }
            Page::Results => {
                header(&mut put);
                put(&format!(
                    "Page {} (Total results: {})",
                    self.results_page,
                    self.results.len()
                ));
                if self.results_page > 1 {
                    put(PREV_PAGE);
                }
                put(NEXT_PAGE);
                for &row in self.shown_results() {
                    let product = catalog.products.get(row);
                    put(&product.asin);
                    put(&product.title);
                    put(&product.price_tag);
                }
            }
            Page::Item | Page::Sub(_) => {
                header(&mut put);
                put(PREV_PAGE);
                let product = catalog
                    .products
                    .get(self.item.expect("an item page has an item"));
                match self.page {
                    Page::Sub(Detail::Description) => put(&product.description),
                    Page::Sub(Detail::Features) => {
                        product.bullet_points.iter().for_each(|b| put(b))
                    }
                    Page::Sub(Detail::Reviews) => {}
                    Page::Sub(Detail::Attributes) => product.attributes.iter().for_each(|a| put(a)),
                    _ => {
                        for (name, values) in &product.options {
                            put(name);
                            values.iter().for_each(|v| put(v));
                        }
                        put(&product.title);
                        put(&format!("Price: {}", product.price_tag));
                        put("Rating: N.A.");
                        for detail in Detail::ALL {
                            if detail != Detail::Attributes || self.show_attrs {
                                put(detail.label());
                            }
                        }
                        put(BUY_NOW);
                    }
                }
            }
            Page::Done => {
                put("Thank you for shopping with us!");
                put("Purchased");
                put("asin");
                let asin = self.item.map(|row| catalog.products.get(row).asin.clone());
                put(&asin.unwrap_or_default());
                put("options");
                let options: Vec<String> = self
                    .options
                    .iter()
                    .map(|(k, v)| format!("\"{k}\": \"{v}\""))
                    .collect();
                put(&format!("{{{}}}", options.join(", ")));
                put("Your score (min 0.0, max 1.0)");
                put(&format!("{}", self.reward.map_or(0.0, |r| r.total)));
            }
        }
        texts
            .iter()
            .map(|t| t.trim())
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join(" [SEP] ")
    }
}
