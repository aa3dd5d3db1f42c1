//! The BM25 ranking against scores computed by hand from the formula in the module doc.

use super::*;

/// A product whose indexed text is its title alone.
fn titled(title: &str) -> Product {
    Product {
        asin: format!("B{:09}", title.len()),
        title: title.into(),
        query: String::new(),
        category: String::new(),
        product_category: String::new(),
        description: String::new(),
        bullet_points: Vec::new(),
        attributes: Vec::new(),
        options: Vec::new(),
        price: 1.0,
        price_tag: "$1.0".into(),
    }
}

fn index(titles: &[&str]) -> SearchIndex {
    SearchIndex::build(titles.iter().map(|t| indexed_text(&titled(t))).enumerate()).unwrap()
}

/// One word's BM25 term: idf · (k₁ + 1) · tf / (tf + k₁ · (1 − b + b · dl / avgdl)).
fn term(n_docs: f64, with_word: f64, tf: f64, dl: f64, avgdl: f64) -> f64 {
    let (k1, b) = (1.2, 0.75);
    let idf = (1.0 + (n_docs - with_word + 0.5) / (with_word + 0.5)).ln();
    idf * (k1 + 1.0) * tf / (tf + k1 * (1.0 - b + b * dl / avgdl))
}

#[test]
fn ranking_and_scores_match_hand_computed_bm25() {
    // 4 products, 10 words: avgdl 2.5. "red" is in 2 of 4, "shoe" in 2 of 4: idf ln 2.
    let idx = index(&["Red Shoe", "red red hat", "blue shoe box", "green hat"]);
    let hits = idx.search_scored("red shoe", 10).unwrap();
    // d0: both words once in 2 words: 2 · ln2 · 2.2 / (1 + 1.2 · 0.85) = 1.50982.
    // d1: "red" twice in 3 words: ln2 · 2.2 · 2 / (2 + 1.2 · 1.15) = 0.90233.
    // d2: "shoe" once in 3 words: ln2 · 2.2 / (1 + 1.38) = 0.64073. d3: no word, no hit.
    let expected = [
        (0, 2.0 * term(4.0, 2.0, 1.0, 2.0, 2.5)),
        (1, term(4.0, 2.0, 2.0, 3.0, 2.5)),
        (2, term(4.0, 2.0, 1.0, 3.0, 2.5)),
    ];
    assert!((expected[0].1 - 1.50982).abs() < 1e-5, "{}", expected[0].1);
    assert!((expected[1].1 - 0.90233).abs() < 1e-5);
    assert!((expected[2].1 - 0.64073).abs() < 1e-5);
    assert_eq!(hits.len(), 3);
    for ((score, row), (want_row, want)) in hits.iter().zip(expected) {
        assert_eq!(*row, want_row);
        assert!(
            (*score as f64 - want).abs() < 1e-4,
            "row {row}: {score} against {want}"
        );
    }
}

#[test]
fn rarer_words_weigh_more() {
    // "hat" (2 of 4) against "box" (1 of 4): idf ln2 = 0.693 against ln(1 + 3.5/1.5) = 1.204.
    let idx = index(&["red shoe", "red red hat", "blue shoe box", "green hat"]);
    let hits = idx.search_scored("hat box", 10).unwrap();
    let box_score = term(4.0, 1.0, 1.0, 3.0, 2.5);
    assert_eq!(hits[0].1, 2);
    assert!((hits[0].0 as f64 - box_score).abs() < 1e-4);
    // "green hat" (2 words) outranks "red red hat" (3 words) on the same "hat".
    assert_eq!(hits[1].1, 3);
    assert_eq!(hits[2].1, 1);
}

#[test]
fn ties_go_to_the_lower_row_and_any_text_is_a_query() {
    let idx = index(&["plain mug", "plain mug", "plain cup"]);
    let hits = idx.search_scored("mug", 10).unwrap();
    assert_eq!(hits.iter().map(|h| h.1).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(hits[0].0, hits[1].0);
    // Stop words are not searched: "the mug" is "mug".
    assert_eq!(idx.search_scored("the mug and", 10).unwrap(), hits);
    // Query syntax characters are plain separators; no words, no hits.
    let odd = idx.search_scored("mug:\"(  -[", 10).unwrap();
    assert_eq!(odd, hits);
    assert!(idx.search_scored("", 10).unwrap().is_empty());
    assert!(idx.search_scored(" ,;[] ", 10).unwrap().is_empty());
    assert!(idx.search_scored("absent", 10).unwrap().is_empty());
    assert_eq!(idx.len(), 3);
}

#[test]
fn ties_rank_in_index_order_not_row_order() {
    // Rows 0..3 indexed as 2, 0, 1: the three equal "mug" scores come back in that order.
    let texts = ["plain mug", "plain mug", "plain mug"];
    let docs = [2, 0, 1].map(|r| (r, indexed_text(&titled(texts[r]))));
    let idx = SearchIndex::build(docs.into_iter()).unwrap();
    let hits = idx.search_scored("mug", 10).unwrap();
    assert_eq!(hits.iter().map(|h| h.1).collect::<Vec<_>>(), vec![2, 0, 1]);
}

#[test]
fn a_search_returns_at_most_fifty_products() {
    let titles: Vec<String> = (0..120).map(|i| format!("lamp number{i}")).collect();
    let refs: Vec<&str> = titles.iter().map(String::as_str).collect();
    let idx = index(&refs);
    let rows = idx.search("lamp").unwrap();
    assert_eq!(rows.len(), SEARCH_RETURN_N);
    assert_eq!(rows[..3], [0, 1, 2]); // equal scores: index order
}

#[test]
fn the_indexed_text_holds_title_description_bullet_attributes_and_options() {
    let mut p = titled("Lamp");
    p.description = "Warm light".into();
    p.bullet_points = vec!["First point".into(), "Second point".into()];
    p.attributes = vec!["easy clean".into()];
    p.options = vec![("color".into(), vec!["red".into(), "blue".into()])];
    assert_eq!(
        indexed_text(&p),
        "lamp warm light first point easy clean color: red, blue"
    );
}

#[test]
fn a_kept_answer_is_the_search_answer_and_old_ones_are_dropped() {
    let titles: Vec<String> = (0..60).map(|i| format!("lamp shade{}", i % 7)).collect();
    let refs: Vec<&str> = titles.iter().map(String::as_str).collect();
    let idx = index(&refs);
    let fresh = |q: &str| -> Vec<usize> {
        let hits = idx.search_scored(q, SEARCH_RETURN_N).unwrap();
        hits.into_iter().map(|(_, r)| r).collect()
    };
    // Eight envs of a group search at once: one search, the same answer for each.
    let answers: Vec<Vec<usize>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| idx.search("lamp shade3").unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(answers.iter().all(|a| *a == fresh("lamp shade3")));
    assert_eq!(idx.cache.lock().unwrap().answers.len(), 1);
    // The key is the words: case, stop words and punctuation do not make a new entry.
    assert_eq!(
        idx.search("The LAMP, shade3!").unwrap(),
        fresh("lamp shade3")
    );
    assert_eq!(idx.cache.lock().unwrap().answers.len(), 1);
    // Full, the oldest answer goes first.
    for i in 0..CACHED_SEARCHES {
        idx.search(&format!("shade{} w{i}", i % 7)).unwrap();
    }
    let cache = idx.cache.lock().unwrap();
    assert_eq!(cache.answers.len(), CACHED_SEARCHES);
    assert!(!cache.answers.contains_key("lamp shade3"));
    assert!(cache.answers.contains_key("shade0 w0"));
}
