//! The fuzzy text matching WebShop's reward uses (`web_agent_site/engine/goal.py` and
//! `normalize.py` of princeton-nlp/WebShop), written again from their definitions:
//!
//! - [`token_set_ratio`]: thefuzz's `fuzz.token_set_ratio` with its default processing
//!   (non-ASCII characters dropped, every character that is not a letter or digit made a
//!   space, lowercased, trimmed). With token sets A and B, I = sorted(A ∩ B) joined by
//!   spaces, D₁ = sorted(A − B), D₂ = sorted(B − A), C₁ = "I D₁", C₂ = "I D₂":
//!   `score = max(ratio(I, C₁), ratio(I, C₂), ratio(C₁, C₂))`, where
//!   `ratio(x, y) = 100 · 2·LCS(x, y) / (|x| + |y|)` (the normalised Indel similarity of
//!   rapidfuzz, LCS over characters), and 0 when either side has no token. thefuzz rounds
//!   the score to an integer (Python's `round`, ties to even); WebShop counts a match when
//!   the rounded score is above 85.
//! - [`normalize_color`]: the first of WebShop's `COLOR_SET` names contained in the text,
//!   else the text unchanged.
//! - [`content_words`]: the words of a product name that WebShop's type reward compares.
//!   WebShop keeps spaCy's NOUN/PROPN tokens (`en_core_web_sm`); roll-flow has no tagger,
//!   so it keeps the lowercased alphabetic words that are not English function words. A
//!   title's adjectives therefore count too: the title score of two names can be higher
//!   than spaCy's, never lower for nouns both share.

/// WebShop's `COLOR_SET` (`normalize.py`), in its order: the first contained one wins.
pub const COLOR_SET: [&str; 102] = [
    "alabaster",
    "apricot",
    "aqua",
    "ash",
    "asphalt",
    "azure",
    "banana",
    "beige",
    "black",
    "blue",
    "blush",
    "bordeaux",
    "bronze",
    "brown",
    "burgundy",
    "camel",
    "camo",
    "caramel",
    "champagne",
    "charcoal",
    "cheetah",
    "chestnut",
    "chocolate",
    "christmas",
    "coffee",
    "cognac",
    "copper",
    "coral",
    "cranberry",
    "cream",
    "crystal",
    "dark",
    "denim",
    "eggplant",
    "elephant",
    "espresso",
    "fuchsia",
    "gold",
    "granite",
    "grape",
    "graphite",
    "grass",
    "gray",
    "green",
    "grey",
    "heather",
    "indigo",
    "ivory",
    "ivy",
    "khaki",
    "lavender",
    "lemon",
    "leopard",
    "light",
    "lilac",
    "lime",
    "magenta",
    "maroon",
    "mauve",
    "merlot",
    "midnight",
    "mint",
    "mocha",
    "multicolor",
    "mushroom",
    "mustard",
    "natural",
    "navy",
    "nude",
    "olive",
    "orange",
    "peach",
    "pewter",
    "pink",
    "plum",
    "purple",
    "rainbow",
    "red",
    "rose",
    "royal",
    "rust",
    "sand",
    "sapphire",
    "seashell",
    "silver",
    "skull",
    "slate",
    "steel",
    "stone",
    "stonewash",
    "sunflower",
    "tan",
    "taupe",
    "teal",
    "tiger",
    "turquoise",
    "violet",
    "walnut",
    "wheat",
    "white",
    "wine",
    "yellow",
];

/// The score above which WebShop counts two texts as the same attribute or option.
pub const MATCH_THRESHOLD: u32 = 85;

/// English function words, left out of [`content_words`].
const FUNCTION_WORDS: [&str; 48] = [
    "a", "an", "the", "and", "or", "for", "with", "without", "of", "in", "on", "to", "by", "at",
    "from", "as", "is", "are", "be", "it", "its", "this", "that", "these", "those", "your", "you",
    "our", "my", "his", "her", "their", "up", "out", "off", "over", "under", "into", "per", "pcs",
    "pack", "set", "not", "no", "all", "more", "most", "very",
];

/// thefuzz's default processing: ASCII only, letters and digits kept, lowercased.
fn process(text: &str) -> String {
    let mapped: String = text
        .chars()
        .filter(char::is_ascii)
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                ' '
            }
        })
        .collect();
    mapped.trim().to_string()
}

/// Length of the longest common subsequence of two byte strings (ASCII after processing).
fn lcs(a: &[u8], b: &[u8]) -> usize {
    let mut row = vec![0usize; b.len() + 1];
    for &x in a {
        let mut diagonal = 0;
        for (j, &y) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if x == y {
                diagonal + 1
            } else {
                above.max(row[j])
            };
            diagonal = above;
        }
    }
    row[b.len()]
}

/// rapidfuzz's `ratio`: 100 · 2·LCS / (|x| + |y|); 0 when both are empty.
fn ratio(x: &str, y: &str) -> f64 {
    let total = x.len() + y.len();
    if total == 0 {
        return 0.0;
    }
    100.0 * 2.0 * lcs(x.as_bytes(), y.as_bytes()) as f64 / total as f64
}

fn joined(words: &[&str]) -> String {
    words.join(" ")
}

/// thefuzz's `token_set_ratio`, rounded to an integer as thefuzz returns it.
pub fn token_set_ratio(a: &str, b: &str) -> u32 {
    let (a, b) = (process(a), process(b));
    let mut set_a: Vec<&str> = a.split_whitespace().collect();
    let mut set_b: Vec<&str> = b.split_whitespace().collect();
    if set_a.is_empty() || set_b.is_empty() {
        return 0;
    }
    set_a.sort_unstable();
    set_a.dedup();
    set_b.sort_unstable();
    set_b.dedup();
    let common: Vec<&str> = set_a
        .iter()
        .copied()
        .filter(|w| set_b.contains(w))
        .collect();
    let only_a: Vec<&str> = set_a
        .iter()
        .copied()
        .filter(|w| !common.contains(w))
        .collect();
    let only_b: Vec<&str> = set_b
        .iter()
        .copied()
        .filter(|w| !common.contains(w))
        .collect();
    let section = joined(&common);
    let combine = |rest: &[&str]| format!("{section} {}", joined(rest)).trim().to_string();
    let (with_a, with_b) = (combine(&only_a), combine(&only_b));
    let score = ratio(&section, &with_a)
        .max(ratio(&section, &with_b))
        .max(ratio(&with_a, &with_b));
    score.round_ties_even() as u32
}

/// Whether WebShop counts `a` and `b` as the same (a token-set score above 85).
pub fn fuzzy_match(a: &str, b: &str) -> bool {
    token_set_ratio(a, b) > MATCH_THRESHOLD
}

/// WebShop's `normalize_color`: the first `COLOR_SET` name inside `text`, else `text`.
pub fn normalize_color(text: &str) -> &str {
    COLOR_SET
        .iter()
        .copied()
        .find(|color| text.contains(color))
        .unwrap_or(text)
}

/// The words of a product name the type reward compares (see the module doc): lowercased
/// alphabetic words of two letters or more that are not function words, deduplicated.
pub fn content_words(name: &str) -> Vec<String> {
    let mut words: Vec<String> = name
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() >= 2 && w.chars().all(char::is_alphabetic))
        .map(str::to_lowercase)
        .filter(|w| !FUNCTION_WORDS.contains(&w.as_str()))
        .collect();
    words.sort_unstable();
    words.dedup();
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_set_ratio_is_100_when_one_token_set_holds_the_other() {
        assert_eq!(token_set_ratio("tea tree", "Tea-Tree"), 100);
        assert_eq!(token_set_ratio("powder snow", "cool powder snow"), 100);
        assert_eq!(token_set_ratio("", "x"), 0);
    }

    #[test]
    fn token_set_ratio_matches_hand_computed_lcs_ratios() {
        // I = "essential", C1 = "essential oil" (13), C2 = "essential oils" (14).
        // ratio(I, C1) = 200·9/22 = 81.8; ratio(I, C2) = 200·9/23 = 78.3;
        // ratio(C1, C2) = 200·13/27 = 96.3 → 96.
        assert_eq!(token_set_ratio("essential oil", "essential oils"), 96);
        // No common word: ratio("blue", "grey") = 200·1/8 = 25 (LCS "e").
        assert_eq!(token_set_ratio("blue", "grey"), 25);
        // I = "" so only ratio(D1, D2): "xl" vs "xxl": 200·2/5 = 80.
        assert_eq!(token_set_ratio("XL", "XXL"), 80);
        assert!(!fuzzy_match("xl", "xxl"));
        assert!(fuzzy_match("essential oil", "essential oils"));
    }

    #[test]
    fn normalize_color_takes_the_first_listed_colour_inside() {
        assert_eq!(normalize_color("dark navy blue"), "blue"); // "blue" precedes "dark"
        assert_eq!(normalize_color("cool powder snow"), "cool powder snow");
    }

    #[test]
    fn content_words_drop_numbers_and_function_words() {
        assert_eq!(
            content_words("Halvex 2 Pack of Clip-in Hair Extension for Women"),
            vec!["clip", "extension", "hair", "halvex", "women"]
        );
    }
}
