//! The shop's data as WebShop's engine holds it after loading: a [`Product`], and the
//! [`Goal`] (instruction) an episode is given.

/// One product, with the fields WebShop's engine gives it after `load_products`.
#[derive(Clone, Debug, PartialEq)]
pub struct Product {
    /// WebShop's ASIN, upper case (`B07XYZ1234`); the result link shows it.
    pub asin: String,
    /// The title (`Title`, also the `name` the type reward compares).
    pub title: String,
    /// The search query the product was found under (lower case; the type reward's
    /// `query_match`).
    pub query: String,
    /// The top-level category (`beauty`, `fashion`, ...).
    pub category: String,
    /// The breadcrumb, parts joined by ` › ` (the type reward's `category_match`).
    pub product_category: String,
    /// `Description`.
    pub description: String,
    /// `BulletPoints`, the Features page.
    pub bullet_points: Vec<String>,
    /// `Attributes`: short phrases the attribute reward matches (`natural looking`).
    pub attributes: Vec<String>,
    /// Buying options in page order: a name (`color`, lower case) and its values (lower
    /// case, `/` written ` | ` as WebShop's loader does).
    pub options: Vec<(String, Vec<String>)>,
    /// The price the shop charges: one of `pricing`, or a point drawn inside a range as
    /// WebShop's `generate_product_prices` does.
    pub price: f64,
    /// The price as the pages show it (`$12.99` or `$10.0 to $20.0`).
    pub price_tag: String,
}

impl Product {
    /// The option name that offers `value`, if any.
    pub fn option_offering(&self, value: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(_, values)| values.iter().any(|v| v == value))
            .map(|(name, _)| name.as_str())
    }
}

/// What an episode asks for: WebShop's goal dict.
#[derive(Clone, Debug, PartialEq)]
pub struct Goal {
    /// The product the instruction was written from (its row in the catalog).
    pub target: usize,
    /// `instruction_text`, shown on every page.
    pub instruction: String,
    /// The attributes asked for (`attributes`).
    pub attributes: Vec<String>,
    /// The option values asked for (`goal_options`).
    pub options: Vec<String>,
    /// `price_upper`: the most the buyer pays (1,000,000 when the instruction names no
    /// price, as in WebShop).
    pub price_upper: f64,
    /// The target's `query`, `product_category` and title (`name`): the type reward's side.
    pub query: String,
    pub product_category: String,
    pub name: String,
}
