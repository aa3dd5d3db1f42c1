//! WebShop's reward against hand-computed cases: each part alone, their combination, and
//! the edge cases goal.py handles (no options, price exactly at the cap, type mismatch).
//! Cases marked "goal.py test" are those of WebShop's `tests/web-agent-site/engine/test_goal.py`.

use super::*;

fn product() -> Product {
    Product {
        asin: "B000000001".into(),
        title: "Lunova Natural Looking Hair Extension, For Women".into(),
        query: "hair extension".into(),
        category: "beauty".into(),
        product_category: "beauty › hair care › hair extensions".into(),
        description: "Soft and heat resistant clip in hair.".into(),
        bullet_points: vec!["Tangle free weft".into()],
        attributes: vec!["natural looking".into(), "human hair".into()],
        options: vec![
            ("color".into(), vec!["black".into(), "light blue".into()]),
            ("size".into(), vec!["16 inch".into(), "20 inch".into()]),
        ],
        price: 40.0,
        price_tag: "$40.00".into(),
    }
}

fn goal(attributes: &[&str], options: &[&str], price_upper: f64) -> Goal {
    let p = product();
    Goal {
        target: 0,
        instruction: "i need a hair extension".into(),
        attributes: attributes.iter().map(|s| s.to_string()).collect(),
        options: options.iter().map(|s| s.to_string()).collect(),
        price_upper,
        query: p.query,
        product_category: p.product_category,
        name: p.title,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn everything_matched_is_one() {
    let g = goal(
        &["natural looking", "human hair"],
        &["black", "20 inch"],
        50.0,
    );
    let r = purchase_reward(&product(), &g, 40.0, &["black", "20 inch"]);
    assert_eq!(
        (r.attributes_matched, r.options_matched, r.r_price),
        (2, 2, true)
    );
    assert_eq!(r.r_type, 1.0);
    assert_eq!(r.total, 1.0);
}

#[test]
fn attributes_match_fuzzily_or_as_substrings_of_title_bullets_description() {
    let p = product();
    // "natural looking": an attribute; "heat resistant": in the description; "tangle
    // free": in a bullet point; "extension": in the title; "waterproof": nowhere.
    let asked: Vec<String> = [
        "natural looking",
        "heat resistant",
        "tangle free",
        "extension",
        "waterproof",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(attribute_reward(&p, &asked), 4);
    // goal.py test: "essential oils" matches the attribute "essential oil" (score 96).
    let mut oils = p.clone();
    oils.attributes = vec![
        "tea tree".into(),
        "essential oil".into(),
        "natural ingredients".into(),
    ];
    let asked: Vec<String> = ["tea tree", "essential oils", "natural ingredients"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(attribute_reward(&oils, &asked), 3);
    // A different phrase is not a match: "human hair" vs "human made" scores
    // ratio("human hair", "human made") = 200·7/20 = 70 (LCS "human a"), below 85.
    oils.attributes = vec!["human made".into()];
    assert_eq!(attribute_reward(&oils, &["human hair".to_string()]), 0);
}

#[test]
fn options_match_after_color_normalisation() {
    // goal.py tests: exact, partial and fuzzy option matches.
    let goal3 = |v: [&str; 3]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        option_reward(
            &["pack of 12", "grey", "XL"],
            &goal3(["grey", "XL", "pack of 12"])
        ),
        3
    );
    assert_eq!(
        option_reward(
            &["pack of 12", "blue", "XL"],
            &goal3(["grey", "XL", "pack of 12"])
        ),
        2
    );
    assert_eq!(
        option_reward(
            &["pack of 12", "powder snow", "XL"],
            &goal3(["cool powder snow", "XL", "pack of 12"])
        ),
        3
    );
    // "navy blue" and "light blue" both normalise to "blue" (the first listed colour).
    assert_eq!(
        option_reward(&["navy blue"], &["light blue".to_string()]),
        1
    );
    assert_eq!(option_reward(&["16 inch"], &["20 inch".to_string()]), 0);
}

#[test]
fn a_goal_without_options_counts_attributes_and_price_only() {
    // (n_att + n_opt + price) / (|att| + |opt| + 1) = (1 + 0 + 1) / (2 + 0 + 1) = 2/3.
    let g = goal(&["natural looking", "waterproof"], &[], 50.0);
    let r = purchase_reward(&product(), &g, 40.0, &["black"]);
    assert_eq!(r.r_option, None);
    assert_eq!(r.options_asked, 0);
    assert_eq!(r.r_att, Some(0.5));
    assert!(close(r.total, 2.0 / 3.0));
}

#[test]
fn a_price_exactly_at_the_cap_counts_and_a_cent_over_does_not() {
    let g = goal(&["natural looking"], &["black"], 40.0);
    let at = purchase_reward(&product(), &g, 40.0, &["black"]);
    assert!(at.r_price);
    assert_eq!(at.total, 1.0);
    let over = purchase_reward(&product(), &g, 40.01, &["black"]);
    assert!(!over.r_price);
    // (1 + 1 + 0) / (1 + 1 + 1) = 2/3.
    assert!(close(over.total, 2.0 / 3.0));
}

#[test]
fn missing_options_and_attributes_give_partial_credit() {
    // Asked: 2 attributes, 2 options, a price. Matched: 1 attribute ("natural looking";
    // "waterproof" is nowhere), 1 option (black; "24 inch" against the chosen "16 inch":
    // I = "inch", C₁ = "inch 24", C₂ = "inch 16"; ratio(I, C) = 200·4/11 = 72.7 and
    // ratio(C₁, C₂) = 200·5/14 = 71.4, so 73 < 85), price under the cap: (1 + 1 + 1) / 5.
    let g = goal(
        &["natural looking", "waterproof"],
        &["black", "24 inch"],
        100.0,
    );
    let r = purchase_reward(&product(), &g, 40.0, &["black", "16 inch"]);
    assert_eq!((r.attributes_matched, r.options_matched), (1, 1));
    assert!(close(r.total, 0.6));
    // No option chosen at all: (1 + 0 + 1) / 5 = 0.4.
    let none = purchase_reward(&product(), &g, 40.0, &[]);
    assert!(close(none.total, 0.4));
}

fn other_kind(title: &str, query: &str, breadcrumb: &str) -> Product {
    Product {
        title: title.into(),
        query: query.into(),
        product_category: breadcrumb.into(),
        ..product()
    }
}

#[test]
fn a_product_of_another_type_earns_nothing() {
    // No shared name word (title score 0): r_type 0 whatever else matches.
    let g = goal(&["natural looking"], &["black"], 50.0);
    let shoe = other_kind("Tri Running Shoe", "running shoe", "fashion › men › shoes");
    let r = purchase_reward(&shoe, &g, 40.0, &["black"]);
    assert_eq!((r.r_type, r.title_score, r.query_match), (0.0, 0.0, false));
    assert_eq!(r.total, 0.0);
    // The same category (breadcrumb shares "beauty" and "hair care") does not save a title
    // score of 0.
    let comb = other_kind("Tri Comb", "comb", "beauty › hair care › combs");
    let r = purchase_reward(&comb, &g, 40.0, &["black"]);
    assert!(r.category_match);
    assert_eq!(r.total, 0.0);
}

#[test]
fn the_type_factor_scales_by_title_score_and_matches() {
    // Goal name words: extension, hair, looking, lunova, natural, women (6).
    let g = goal(&["natural looking"], &["black"], 50.0);
    // Shares "hair" only: 1/6 = 0.167, no query or category match → 0.5.
    let wig = other_kind("Vola Hair Wig", "wig", "fashion › wigs");
    let r = type_reward(&wig, &g);
    assert!(close(r.title_score, 1.0 / 6.0));
    assert_eq!(r.r_type, 0.5);
    // Combined: 0.5 · (1 + 1 + 1) / 3 = 0.5.
    assert!(close(
        purchase_reward(&wig, &g, 40.0, &["black"]).total,
        0.5
    ));
    // Same words with the goal's query: 1.
    let same_query = other_kind("Vola Hair Wig", "hair extension", "fashion › wigs");
    assert_eq!(type_reward(&same_query, &g).r_type, 1.0);
    // 2/6 = 0.33 > 0.2 → 1 even with no query or category match.
    let two = other_kind("Natural Hair Wig", "wig", "fashion › wigs");
    assert_eq!(type_reward(&two, &g).r_type, 1.0);
    // A goal name of 12 words sharing one: 1/12 < 0.1 → 0.1 even with the same query.
    let mut long = g.clone();
    long.name = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda hair".into();
    let r = type_reward(&same_query, &long);
    assert!(r.query_match);
    assert_eq!(r.r_type, 0.1);
    // A goal name without words scores 0.2: not above 0.2, so only the query saves it.
    long.name = "123 456".into();
    assert_eq!(type_reward(&wig, &long).r_type, 0.5);
    assert_eq!(type_reward(&same_query, &long).r_type, 1.0);
}
