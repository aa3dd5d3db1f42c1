//! BM25 product search with tantivy: WebShop's `search[query]`.
//!
//! WebShop indexes one text per product with Pyserini (Lucene): title, description, the
//! first bullet point and the options (`name: v1, v2, and name: ...`), lower-cased
//! (`search_engine/convert_product_file_format.py`), and returns the top 50 hits
//! (`SEARCH_RETURN_N`). roll-flow indexes the same text plus the product's attributes in
//! one tantivy field, tokenised by tantivy's default analyser (split on anything but
//! letters and digits, lower-cased, words over 40 bytes dropped; Lucene's English analyser
//! would also stem and drop stop words).
//!
//! The score is tantivy's BM25 (Robertson et al.; tantivy `query/bm25.rs`), summed over
//! the query's words (each word once per occurrence in the query, as Lucene's bag of words):
//!
//! `score(d) = Σ_w idf(w) · (k₁ + 1) · tf(w, d) / (tf(w, d) + k₁ · (1 − b + b · |d| / avgdl))`,
//! `idf(w) = ln(1 + (N − n(w) + 0.5) / (n(w) + 0.5))`,
//!
//! with k₁ = 1.2 and b = 0.75 (Lucene's defaults; Pyserini's are 0.9 and 0.4), N the number
//! of products, n(w) the products containing w, |d| the product's word count (tantivy
//! stores it in one byte, exact up to 40 words) and avgdl the mean word count. Ties are
//! broken by catalog row, so a search gives the same list however the index was segmented.
//!
//! The query text is never parsed as a query language: its words become plain term
//! clauses, so any text a model writes (`search[a:"b" -c (d]`) is a valid search.

use tantivy::collector::sort_key::{SortBySimilarityScore, SortByStaticFastValue};
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, Schema, FAST, TEXT};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{Index, IndexWriter, Order, Searcher, TantivyDocument, Term};

use crate::error::EnvError;
use crate::webshop::catalog::{Product, ProductStore};

/// Hits a search returns (WebShop's `SEARCH_RETURN_N`).
pub const SEARCH_RETURN_N: usize = 50;

/// Indexing memory per writer thread (tantivy needs at least 15 MB).
const HEAP_PER_THREAD: usize = 64 << 20;

/// The read-only BM25 index over a catalog's products.
pub struct SearchIndex {
    searcher: Searcher,
    contents: Field,
    analyzer: TextAnalyzer,
}

fn search_error(e: tantivy::TantivyError) -> EnvError {
    EnvError::Data {
        env: "WebShop",
        reason: format!("search index: {e}"),
    }
}

/// The text WebShop indexes for a product, with its attributes added (see the module doc).
pub fn indexed_text(product: &Product) -> String {
    let options: Vec<String> = product
        .options
        .iter()
        .map(|(name, values)| format!("{name}: {}", values.join(", ")))
        .collect();
    let parts = [
        product.title.as_str(),
        product.description.as_str(),
        product.bullet_points.first().map_or("", String::as_str),
        &product.attributes.join(", "),
        &options.join(", and "),
    ];
    parts.join(" ").to_lowercase()
}

impl SearchIndex {
    /// Indexes every product of `products` (with as many writer threads as cores, up to 4).
    pub fn build(products: &ProductStore) -> Result<SearchIndex, EnvError> {
        let mut schema = Schema::builder();
        let contents = schema.add_text_field("contents", TEXT);
        let row = schema.add_u64_field("row", FAST);
        let index = Index::create_in_ram(schema.build());
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, 4);
        let mut writer: IndexWriter<TantivyDocument> = index
            .writer_with_num_threads(threads, threads * HEAP_PER_THREAD)
            .map_err(search_error)?;
        for r in 0..products.len() {
            let mut doc = TantivyDocument::new();
            doc.add_text(contents, indexed_text(&products.get(r)));
            doc.add_u64(row, r as u64);
            writer.add_document(doc).map_err(search_error)?;
        }
        writer.commit().map_err(search_error)?;
        writer.wait_merging_threads().map_err(search_error)?;
        let reader = index.reader().map_err(search_error)?;
        let analyzer = index.tokenizer_for_field(contents).map_err(search_error)?;
        Ok(SearchIndex {
            searcher: reader.searcher(),
            contents,
            analyzer,
        })
    }

    /// The words of `text` as the index sees them.
    pub fn words(&self, text: &str) -> Vec<String> {
        let mut analyzer = self.analyzer.clone();
        let mut stream = analyzer.token_stream(text);
        let mut words = Vec::new();
        while stream.advance() {
            words.push(stream.token().text.clone());
        }
        words
    }

    /// The best `limit` products for `query` with their BM25 scores, best first (ties by
    /// row); empty when the query has no word.
    pub fn search_scored(&self, query: &str, limit: usize) -> Result<Vec<(f32, usize)>, EnvError> {
        let clauses: Vec<(Occur, Box<dyn Query>)> = self
            .words(query)
            .into_iter()
            .map(|word| {
                let term = Term::from_field_text(self.contents, &word);
                let query: Box<dyn Query> =
                    Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs));
                (Occur::Should, query)
            })
            .collect();
        if clauses.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let query = BooleanQuery::new(clauses);
        let order = (
            (SortBySimilarityScore, Order::Desc),
            (SortByStaticFastValue::<u64>::for_field("row"), Order::Asc),
        );
        let hits = self
            .searcher
            .search(&query, &TopDocs::with_limit(limit).order_by(order))
            .map_err(search_error)?;
        Ok(hits
            .into_iter()
            .filter_map(|((score, row), _)| row.map(|r| (score, r as usize)))
            .collect())
    }

    /// The rows of the top [`SEARCH_RETURN_N`] products for `query`, best first.
    pub fn search(&self, query: &str) -> Result<Vec<usize>, EnvError> {
        Ok(self
            .search_scored(query, SEARCH_RETURN_N)?
            .into_iter()
            .map(|(_, row)| row)
            .collect())
    }

    /// Number of indexed products.
    pub fn len(&self) -> u64 {
        self.searcher.num_docs()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
