//! The loader on small files written here in WebShop's formats, and its errors.

use std::path::{Path, PathBuf};

use super::*;

const PRODUCTS: &str = r#"[
  {"asin": "B01ABCDEF1", "name": "Lunova Clip In Hair Extension", "full_description": "Soft hair.",
   "small_description": ["Heat resistant", "Easy to apply"], "pricing": "$24.99",
   "customization_options": {"Color": [{"value": "Natural Black", "image": null}, {"value": "Brown/Blonde"}], "Size": null},
   "query": " Hair Extension ", "category": "beauty", "product_category": "Beauty › Hair Care › Extensions",
   "images": ["x.jpg"], "brand": "Lunova"},
  {"asin": "B01ABCDEF2", "name": "Tri Running Shoe", "full_description": "Light.",
   "small_description": "Breathable", "pricing": "$40.00 - $60.00", "customization_options": null,
   "query": "running shoe", "category": "fashion", "product_category": "Fashion › Shoes"},
  {"asin": "B01ABCDEF1", "name": "a repeated ASIN", "query": "x", "category": "x", "product_category": "x"},
  {"asin": "nan", "name": "no ASIN", "query": "x", "category": "x", "product_category": "x"},
  {"asin": "B01ABCDEF3", "name": "Free Sample", "pricing": "", "query": "sample", "category": "x", "product_category": "x"}
]"#;

const ATTRIBUTES: &str = r#"{
  "B01ABCDEF1": {"attributes": ["natural looking", "heat resistant"], "instruction": "i need a natural looking hair extension",
                 "instruction_attributes": ["natural looking"]},
  "B01ABCDEF2": {"attributes": ["lightweight"]}
}"#;

const HUMAN: &str = r#"{
  "B01ABCDEF1": [
    {"instruction": "i want a black hair extension that is heat resistant.", "instruction_attributes": ["heat resistant"],
     "instruction_options": ["natural black"], "asin": "B01ABCDEF1"},
    {"instruction": "no attributes, skipped", "instruction_attributes": [], "instruction_options": []}
  ],
  "B01ABCDEF2": [
    {"instruction": "light running shoes", "instruction_attributes": ["lightweight"], "instruction_options": []}
  ]
}"#;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn products_load_as_webshops_engine_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let products = write(dir.path(), "items.json", PRODUCTS);
    let attributes = write(dir.path(), "ins.json", ATTRIBUTES);
    let (items, goals) = load(&products, &attributes, None, None).unwrap();
    // The repeated ASIN and "nan" are skipped.
    assert_eq!(
        items.iter().map(|p| p.asin.as_str()).collect::<Vec<_>>(),
        ["B01ABCDEF1", "B01ABCDEF2", "B01ABCDEF3"]
    );
    let hair = &items[0];
    assert_eq!(hair.title, "Lunova Clip In Hair Extension");
    assert_eq!(hair.query, "hair extension");
    assert_eq!(hair.bullet_points, ["Heat resistant", "Easy to apply"]);
    // Lower-cased names and values, "/" as " | ", null options dropped.
    assert_eq!(
        hair.options,
        vec![(
            "color".to_string(),
            vec!["natural black".to_string(), "brown | blonde".to_string()]
        )]
    );
    assert_eq!((hair.price, hair.price_tag.as_str()), (24.99, "$24.99"));
    assert_eq!(hair.attributes, ["natural looking", "heat resistant"]);
    let shoe = &items[1];
    assert_eq!(shoe.price_tag, "$40.0 to $60.0");
    assert!((40.0..60.0).contains(&shoe.price));
    assert_eq!(shoe.bullet_points, ["Breathable"]);
    // No pricing: $100; no attributes entry: DUMMY_ATTR.
    assert_eq!(
        (items[2].price, items[2].price_tag.as_str()),
        (100.0, "$100.0")
    );
    assert_eq!(items[2].attributes, ["DUMMY_ATTR"]);
    // Synthetic goals: one per option combination of the one product with an instruction.
    assert_eq!(goals.len(), 2);
    assert!(goals[0]
        .instruction
        .starts_with("i need a natural looking hair extension with color: natural black"));
    assert!(goals[1].instruction.contains("with color: brown | blonde"));
    // 24.99: the cap is the larger of two of 30, 40, 50, 60.
    assert!(
        [40.0, 50.0, 60.0].contains(&goals[0].price_upper),
        "{}",
        goals[0].price_upper
    );
    assert!(goals[0].instruction.ends_with(&format!(
        ", and price lower than {:.2} dollars",
        goals[0].price_upper
    )));
    assert_eq!(goals[0].options, ["natural black"]);
    assert_eq!(
        (goals[0].target, goals[0].query.as_str()),
        (0, "hair extension")
    );
}

#[test]
fn human_goals_keep_instructions_with_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let products = write(dir.path(), "items.json", PRODUCTS);
    let attributes = write(dir.path(), "ins.json", ATTRIBUTES);
    let human = write(dir.path(), "human.json", HUMAN);
    let (_, goals) = load(&products, &attributes, Some(&human), None).unwrap();
    assert_eq!(goals.len(), 2);
    assert!(goals[0]
        .instruction
        .starts_with("i want a black hair extension that is heat resistant, and price"));
    assert_eq!(goals[0].options, ["natural black"]);
    assert_eq!(
        (goals[1].target, goals[1].attributes.as_slice()),
        (1, &["lightweight".to_string()][..])
    );
    // `limit` keeps the first product only.
    let (items, goals) = load(&products, &attributes, Some(&human), Some(1)).unwrap();
    assert_eq!((items.len(), goals.len()), (1, 1));
}

#[test]
fn malformed_files_get_errors_that_name_the_file_and_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let attributes = write(dir.path(), "ins.json", ATTRIBUTES);
    let cases = [
        ("[{\"asin\": \"B1\", \"name\": \"x\"", "EOF"),
        ("{\"asin\": \"B1\"}", "not a WebShop products file"),
        ("[{\"name\": \"x\"}]", "product #0 has no `asin`"),
        ("[{\"asin\": \"B1\", \"name\": \"x\", \"category\": \"c\", \"product_category\": \"c\"}]", "product #0 (B1) has no `query`"),
        ("[{\"asin\": \"B1\", \"name\": \"x\", \"query\": \"q\", \"category\": \"c\", \"product_category\": \"c\", \"pricing\": \"$abc\"}]", "is not a price"),
        ("[{\"asin\": \"B1\", \"name\": 7}]", "invalid type"),
        ("[]", "no usable product"),
    ];
    for (text, wanted) in cases {
        let products = write(dir.path(), "bad.json", text);
        let err = load(&products, &attributes, None, None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("bad.json") && err.contains(wanted),
            "{text}: {err}"
        );
    }
    let products = write(dir.path(), "items.json", PRODUCTS);
    let err = load(&products, &dir.path().join("missing.json"), None, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing.json"), "{err}");
    // Products without any instruction: no goal to play.
    let none = write(dir.path(), "none.json", "{}");
    let err = load(&products, &none, None, None).unwrap_err().to_string();
    assert!(err.contains("no goal"), "{err}");
}
