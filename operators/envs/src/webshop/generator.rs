//! A generated catalog: products and instructions made from [`vocabulary`](super::vocabulary), deterministic
//! from a seed, any size from one product to millions.
//!
//! - Product `i` is drawn from its own random stream (the catalog seed and `i` mixed), so
//!   it can be generated again at any time, alone: a catalog keeps no product text.
//!   A product has a kind, 2–4 of the kind's attributes (one of them in the title), each of
//!   the kind's options with 2–5 values, a brand, a price (a point price or a range, the
//!   charged price drawn inside it as WebShop's `generate_product_prices` does), a
//!   description and three bullet points.
//! - Its ASIN is `B` and 9 base-36 digits of an invertible affine map of `i`, so ASINs look
//!   random and the row is recovered from the ASIN alone.
//! - The goal of seed `s` is written from a target product drawn by `s`, as WebShop's
//!   synthetic goals are (`get_synthetic_goals`): 1–3 of its attributes, one value of each
//!   of its options (` with color: navy blue, and size: large`), and the price cap
//!   WebShop draws: of the first four multiples of 10 above the price, the larger of two
//!   drawn without replacement (`, and price lower than 40.00 dollars`); none (cap
//!   1,000,000) when fewer than two multiples below 1,000 lie above the price.

use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::webshop::product::{Goal, Product};
use crate::webshop::vocabulary::{
    ProductKind, BRAND_SYLLABLES, INSTRUCTION_TEMPLATES, KINDS, TITLE_TAILS,
};

/// ASINs are `B` + this many base-36 digits.
const ASIN_DIGITS: u32 = 9;
const ASIN_SPACE: u64 = 36u64.pow(ASIN_DIGITS);
/// The affine map row → ASIN number: `(row · A + C) mod 36⁹`, A prime to 36.
const ASIN_MULTIPLIER: u64 = 1_000_000_007;
const ASIN_OFFSET: u64 = 48_271_000_011;
/// The price cap of an instruction that names no price (WebShop's `price_upper`).
pub const NO_PRICE_CAP: f64 = 1_000_000.0;

/// Generates products and goals of one catalog.
#[derive(Clone, Debug)]
pub struct CatalogGenerator {
    products: usize,
    seed: u64,
    asin_inverse: u64,
}

fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 32)).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    z ^ (z >> 32)
}

/// The inverse of `a` modulo `m` (a prime to m), by the extended Euclidean algorithm.
fn inverse_mod(a: u64, m: u64) -> u64 {
    let (mut r0, mut r1) = (m as i128, (a % m) as i128);
    let (mut t0, mut t1) = (0i128, 1i128);
    while r1 != 0 {
        let q = r0 / r1;
        (r0, r1) = (r1, r0 - q * r1);
        (t0, t1) = (t1, t0 - q * t1);
    }
    t0.rem_euclid(m as i128) as u64
}

fn title_case(text: &str) -> String {
    text.split(' ')
        .map(|w| {
            let mut chars = w.chars();
            match chars.next() {
                Some(c) => c.to_uppercase().chain(chars).collect(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// WebShop's price cap for a product at `price` (see the module doc), and the RNG draw.
pub fn price_cap(price: f64, rng: &mut impl Rng) -> Option<f64> {
    let above: Vec<f64> = (1..100)
        .map(|i| 10.0 * i as f64)
        .filter(|&p| p > price)
        .take(4)
        .collect();
    if above.len() < 2 {
        return None;
    }
    let picked: Vec<f64> = above.choose_multiple(rng, 2).copied().collect();
    Some(picked[0].max(picked[1]))
}

impl CatalogGenerator {
    /// A catalog of `products` products from `seed`.
    pub fn new(products: usize, seed: u64) -> CatalogGenerator {
        CatalogGenerator {
            products,
            seed,
            asin_inverse: inverse_mod(ASIN_MULTIPLIER, ASIN_SPACE),
        }
    }

    /// Number of products.
    pub fn products(&self) -> usize {
        self.products
    }

    /// The ASIN of product `row`.
    pub fn asin(&self, row: usize) -> String {
        let mut n = ((row as u128 * ASIN_MULTIPLIER as u128 + ASIN_OFFSET as u128)
            % ASIN_SPACE as u128) as u64;
        let mut digits = [b'0'; ASIN_DIGITS as usize];
        for d in digits.iter_mut().rev() {
            *d = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[(n % 36) as usize];
            n /= 36;
        }
        format!("B{}", String::from_utf8_lossy(&digits))
    }

    /// The row whose ASIN is `asin` (any case), if it is one of this catalog's.
    pub fn row_of(&self, asin: &str) -> Option<usize> {
        let digits = asin.strip_prefix(['B', 'b'])?;
        if digits.len() != ASIN_DIGITS as usize {
            return None;
        }
        let n = u64::from_str_radix(digits, 36).ok()?;
        let shifted = (n as u128 + ASIN_SPACE as u128 - ASIN_OFFSET as u128) % ASIN_SPACE as u128;
        let row = (shifted * self.asin_inverse as u128 % ASIN_SPACE as u128) as usize;
        (row < self.products).then_some(row)
    }

    fn kind_of(rng: &mut ChaCha8Rng) -> &'static ProductKind {
        &KINDS[rng.random_range(0..KINDS.len())]
    }

    /// Product `row` (`row < products()`), the same every time.
    pub fn product(&self, row: usize) -> Product {
        let mut rng = ChaCha8Rng::seed_from_u64(mix(self.seed, row as u64));
        let kind = Self::kind_of(&mut rng);
        let n_attributes = rng.random_range(2..=4.min(kind.attributes.len()));
        let attributes: Vec<String> = kind
            .attributes
            .choose_multiple(&mut rng, n_attributes)
            .map(|a| a.to_string())
            .collect();
        let options: Vec<(String, Vec<String>)> = kind
            .options
            .iter()
            .map(|option| {
                let n = rng.random_range(2..=5.min(option.values.len()));
                let mut picked: Vec<usize> = (0..option.values.len()).collect();
                picked.shuffle(&mut rng);
                picked.truncate(n);
                picked.sort_unstable();
                let values = picked
                    .iter()
                    .map(|&i| option.values[i].to_string())
                    .collect();
                (option.name.to_string(), values)
            })
            .collect();
        let syllables = rng.random_range(2..=3);
        let brand: String = (0..syllables)
            .map(|_| *BRAND_SYLLABLES.choose(&mut rng).expect("syllables"))
            .collect();
        let tail = TITLE_TAILS.choose(&mut rng).expect("tails");
        let title = format!(
            "{} {} {}, {}",
            title_case(&brand),
            title_case(&attributes[0]),
            title_case(kind.name),
            title_case(tail)
        );
        let (lo, hi) = kind.price;
        let low = (rng.random_range(lo..hi) * 100.0).round() / 100.0;
        let (price, price_tag) = if rng.random_bool(0.8) {
            (low, format!("${low:.2}"))
        } else {
            let high = (low * rng.random_range(1.1..1.6) * 100.0).round() / 100.0;
            (rng.random_range(low..high), format!("${low} to ${high}"))
        };
        let rest = attributes[1..].join(" and ");
        let description = format!(
            "This {} from {} is {}. {} It is made for {}.",
            kind.name,
            title_case(&brand),
            attributes[0],
            if rest.is_empty() {
                String::new()
            } else {
                format!("It is also {rest}.")
            },
            tail.trim_start_matches("for ")
        );
        let bullet_points = vec![
            format!("{}: {}", title_case(&attributes[0]), kind.name),
            format!("Category: {}", kind.category),
            format!("Brand: {}", title_case(&brand)),
        ];
        Product {
            asin: self.asin(row),
            title,
            query: kind.name.to_string(),
            category: kind.category.to_string(),
            product_category: format!("{} › {}", kind.category, kind.breadcrumb),
            description,
            bullet_points,
            attributes,
            options,
            price,
            price_tag,
        }
    }

    /// The goal of an episode reset with `seed` (see the module doc).
    pub fn goal(&self, seed: u64) -> Goal {
        let mut rng = ChaCha8Rng::seed_from_u64(mix(self.seed ^ 0x5EED_6A11, seed));
        let target = rng.random_range(0..self.products);
        let product = self.product(target);
        let n_attributes = rng.random_range(1..=3.min(product.attributes.len()));
        let attributes: Vec<String> = product
            .attributes
            .choose_multiple(&mut rng, n_attributes)
            .cloned()
            .collect();
        let chosen: Vec<(String, String)> = product
            .options
            .iter()
            .map(|(name, values)| {
                let value = values.choose(&mut rng).expect("2+ values").clone();
                (name.clone(), value)
            })
            .collect();
        let template = INSTRUCTION_TEMPLATES.choose(&mut rng).expect("templates");
        let mut text = template
            .replace("{kind}", &product.query)
            .replace("{attrs}", &attributes.join(" and "));
        if !chosen.is_empty() {
            let listed: Vec<String> = chosen.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            text.push_str(&format!(" with {}", listed.join(", and ")));
        }
        let cap = price_cap(product.price, &mut rng);
        if let Some(cap) = cap {
            text.push_str(&format!(", and price lower than {cap:.2} dollars"));
        }
        Goal {
            target,
            instruction: text,
            attributes,
            options: chosen.into_iter().map(|(_, v)| v).collect(),
            price_upper: cap.unwrap_or(NO_PRICE_CAP),
            query: product.query,
            product_category: product.product_category,
            name: product.title,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_are_the_same_every_time_and_asins_give_back_their_row() {
        let a = CatalogGenerator::new(100_000, 3);
        let b = CatalogGenerator::new(100_000, 3);
        for row in [0, 1, 17, 99_999] {
            assert_eq!(a.product(row), b.product(row));
            let asin = a.asin(row);
            assert_eq!(asin.len(), 10);
            assert_eq!(a.row_of(&asin), Some(row));
            assert_eq!(a.row_of(&asin.to_lowercase()), Some(row));
        }
        assert_ne!(a.product(0), CatalogGenerator::new(100_000, 4).product(0));
        assert_eq!(a.row_of("B"), None);
        assert_eq!(a.row_of("Bzzzzzzzzz"), None); // a row past the catalog
        assert_eq!(a.row_of("B!!!!!!!!!"), None);
    }

    #[test]
    fn goals_ask_for_what_their_target_has() {
        let generator = CatalogGenerator::new(1000, 0);
        for seed in 0..200 {
            let goal = generator.goal(seed);
            let target = generator.product(goal.target);
            assert!(goal
                .attributes
                .iter()
                .all(|a| target.attributes.contains(a)));
            assert_eq!(goal.options.len(), target.options.len());
            for value in &goal.options {
                assert!(target.option_offering(value).is_some(), "{value}");
            }
            assert!(target.price <= goal.price_upper);
            assert!(goal.instruction.contains(&target.query));
            if goal.price_upper < NO_PRICE_CAP {
                let text = format!("price lower than {:.2} dollars", goal.price_upper);
                assert!(goal.instruction.ends_with(&text), "{}", goal.instruction);
            }
        }
    }

    #[test]
    fn price_caps_follow_webshops_rule() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        // 12.5: multiples above are 20, 30, 40, 50; the larger of two is 30, 40 or 50.
        for _ in 0..100 {
            let cap = price_cap(12.5, &mut rng).unwrap();
            assert!([30.0, 40.0, 50.0].contains(&cap), "{cap}");
        }
        // Exactly 20: 20 is not above it, so 30..60.
        assert!(price_cap(20.0, &mut rng).unwrap() >= 40.0);
        // 985: only 990 lies above, so no cap.
        assert_eq!(price_cap(985.0, &mut rng), None);
    }
}
