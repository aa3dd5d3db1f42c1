//! BM25 product search with tantivy: WebShop's `search[query]`.
//!
//! WebShop indexes one text per product with Pyserini (Lucene): title, description, the
//! first bullet point and the options (`name: v1, v2, and name: ...`), lower-cased
//! (`search_engine/convert_product_file_format.py`), and returns the top 50 hits
//! (`SEARCH_RETURN_N`). roll-flow indexes the same text plus the product's attributes in
//! one tantivy field. Words are split on anything but letters and digits, lower-cased,
//! dropped when over 40 bytes or one of Lucene's 33 English stop words (`and`, `with`,
//! `the`, ...: Lucene's `ENGLISH_STOP_WORDS_SET`, which Pyserini's analyser drops too; it
//! also stems, which roll-flow does not).
//!
//! The score is tantivy's BM25 (Robertson et al.; tantivy `query/bm25.rs`), summed over
//! the query's words (each word once per occurrence in the query, as Lucene's bag of words):
//!
//! `score(d) = Σ_w idf(w) · (k₁ + 1) · tf(w, d) / (tf(w, d) + k₁ · (1 − b + b · |d| / avgdl))`,
//! `idf(w) = ln(1 + (N − n(w) + 0.5) / (n(w) + 0.5))`,
//!
//! with k₁ = 1.2 and b = 0.75 (Lucene's defaults; Pyserini's are 0.9 and 0.4), N the number
//! of products, n(w) the products containing w, |d| the product's word count (tantivy
//! stores it in one byte, exact up to 40 words) and avgdl the mean word count.
//!
//! The index is one segment whose documents are in the order the catalog gives: by
//! [`index_key`] (the product's search query, then its attributes, then its options),
//! then by row. Ties rank in that order, so a search gives the same list on every build.
//!
//! tantivy stores the index, the postings and the BM25 weights; the k best are found by
//! [`max_score`] (block-max MaxScore, as Lucene does for disjunctions)
//! rather than tantivy's `TopDocs` (block-max WAND), which gives the same list (checked
//! against it in the tests) but spends most of a 20-word search sorting its cursors. With
//! similar products side by side most windows of 128 documents hold few of a query's rarer
//! words and are skipped whole (document reordering, as search engines do to prune more).
//! At a million generated products a search is about 3 times faster than tantivy's
//! `TopDocs` on the same index, which was 3.3 times faster than in row order
//! (bench/history/webshop.md).
//!
//! [`SearchIndex::search`] keeps its last [`CACHED_SEARCHES`] answers by the query's words:
//! the envs of a group share an instruction and search the same words, and an agent that
//! pages back (`< prev`) searches again, as WebShop's server does. The index is read-only,
//! so a cached answer is the answer.
//!
//! The query text is never parsed as a query language: its words become plain term
//! clauses, so any text a model writes (`search[a:"b" -c (d]`) is a valid search.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tantivy::columnar::Column;
use tantivy::indexer::NoMergePolicy;
use tantivy::postings::BlockSegmentPostings;
use tantivy::query::Bm25Weight;
use tantivy::schema::{Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST};
use tantivy::tokenizer::{
    LowerCaser, RemoveLongFilter, SimpleTokenizer, StopWordFilter, TextAnalyzer,
};
use tantivy::{Index, IndexWriter, Searcher, TantivyDocument, Term};

use crate::error::EnvError;
use crate::webshop::max_score::{self, WordList, WordWindows};
use crate::webshop::product::Product;
use crate::webshop::recent::{entry, Recent};

/// Hits a search returns (WebShop's `SEARCH_RETURN_N`).
pub const SEARCH_RETURN_N: usize = 50;

/// Lucene's `EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`.
pub const STOP_WORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// Searches whose answers are kept (by the query's words, oldest dropped first).
pub const CACHED_SEARCHES: usize = 4096;

/// Words whose window-max indexes are kept (7.8 KB each at a million products).
pub const KEPT_WORD_WINDOWS: usize = 4096;

/// The analyser of index and queries: split, drop long words, lower-case, drop stop words.
fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(STOP_WORDS.map(String::from)))
        .build()
}

/// The analyser's name in the index.
const ANALYZER: &str = "webshop";

/// Indexing memory of the one writer thread (tantivy needs at least 15 MB).
const WRITER_HEAP: usize = 512 << 20;

/// The read-only BM25 index over a catalog's products.
pub struct SearchIndex {
    searcher: Searcher,
    /// The catalog row of each document of the one segment (`None`: no product).
    rows: Option<Column<u64>>,
    contents: Field,
    analyzer: TextAnalyzer,
    /// Recent answers by the query's words.
    answers: Mutex<Recent<Answer>>,
    /// Recently searched words' window-max indexes.
    windows: Mutex<Recent<Windows>>,
}

/// The top rows of a search, or the search's error as text.
type Answer = Arc<OnceLock<Result<Vec<usize>, String>>>;

/// A word's window-max index, or the error of making it as text.
type Windows = Arc<OnceLock<Result<Arc<WordWindows>, String>>>;

/// `result` with its error as text, for a kept entry.
fn as_text<T>(result: Result<T, EnvError>) -> Result<T, String> {
    result.map_err(|e| match e {
        EnvError::Data { reason, .. } => reason,
        other => other.to_string(),
    })
}

/// A kept entry's result, its error as the env's.
fn from_text<T: Clone>(kept: &Result<T, String>) -> Result<T, EnvError> {
    kept.clone().map_err(|reason| EnvError::Data {
        env: "WebShop",
        reason,
    })
}

fn search_error(e: tantivy::TantivyError) -> EnvError {
    EnvError::Data {
        env: "WebShop",
        reason: format!("search index: {e}"),
    }
}

/// The key that orders the index's documents: the product's search query, then its sorted
/// attributes, then its options (`name:v1,v2|...`), so products sharing more of the words a
/// query asks for lie closer together.
pub fn index_key(product: &Product) -> String {
    let mut attributes: Vec<&str> = product.attributes.iter().map(String::as_str).collect();
    attributes.sort_unstable();
    let options: Vec<String> = product
        .options
        .iter()
        .map(|(name, values)| format!("{name}:{}", values.join(",")))
        .collect();
    format!(
        "{}|{}|{}",
        product.query,
        attributes.join("|"),
        options.join("|")
    )
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
    /// Indexes `(row, text)` pairs ([`indexed_text`]) into one segment whose documents keep
    /// the pairs' order (one writer thread keeps the order within a segment; the segments
    /// it flushed are merged in that order), so equal scores rank in that order.
    pub fn build(docs: impl Iterator<Item = (usize, String)>) -> Result<SearchIndex, EnvError> {
        let mut schema = Schema::builder();
        let indexing = TextFieldIndexing::default()
            .set_tokenizer(ANALYZER)
            .set_index_option(IndexRecordOption::WithFreqs);
        let options = TextOptions::default().set_indexing_options(indexing);
        let contents = schema.add_text_field("contents", options);
        let row = schema.add_u64_field("row", FAST);
        let index = Index::create_in_ram(schema.build());
        index.tokenizers().register(ANALYZER, analyzer());
        let mut writer: IndexWriter<TantivyDocument> = index
            .writer_with_num_threads(1, WRITER_HEAP)
            .map_err(search_error)?;
        writer.set_merge_policy(Box::new(NoMergePolicy));
        // The position of each row in the order given, to merge the segments in that order.
        let mut position: HashMap<u64, usize> = HashMap::new();
        for (r, text) in docs {
            let mut doc = TantivyDocument::new();
            doc.add_text(contents, text);
            doc.add_u64(row, r as u64);
            writer.add_document(doc).map_err(search_error)?;
            let next = position.len();
            position.entry(r as u64).or_insert(next);
        }
        writer.commit().map_err(search_error)?;
        let flushed = index.searchable_segment_ids().map_err(search_error)?;
        if flushed.len() > 1 {
            let searcher = index.reader().map_err(search_error)?.searcher();
            let mut by_position = Vec::new();
            for segment in searcher.segment_readers() {
                let rows = segment.fast_fields().u64("row").map_err(search_error)?;
                let first = rows.first(0).and_then(|r| position.get(&r).copied());
                by_position.push((first.unwrap_or(usize::MAX), segment.segment_id()));
            }
            by_position.sort_unstable();
            let ordered: Vec<_> = by_position.into_iter().map(|(_, id)| id).collect();
            writer.merge(&ordered).wait().map_err(search_error)?;
        }
        writer.wait_merging_threads().map_err(search_error)?;
        let reader = index.reader().map_err(search_error)?;
        let searcher = reader.searcher();
        let rows = match searcher.segment_readers() {
            [] => None,
            [segment] => Some(segment.fast_fields().u64("row").map_err(search_error)?),
            more => {
                return Err(EnvError::Data {
                    env: "WebShop",
                    reason: format!("search index: {} segments after the merge", more.len()),
                })
            }
        };
        Ok(SearchIndex {
            searcher,
            rows,
            contents,
            analyzer: index.tokenizer_for_field(contents).map_err(search_error)?,
            answers: Mutex::new(Recent::new(CACHED_SEARCHES)),
            windows: Mutex::new(Recent::new(KEPT_WORD_WINDOWS)),
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

    /// The best `limit` products for `query` with their BM25 scores, best first (ties in
    /// index order); empty when the query has no word.
    pub fn search_scored(&self, query: &str, limit: usize) -> Result<Vec<(f32, usize)>, EnvError> {
        self.search_words(&self.words(query), limit)
    }

    /// [`search_scored`](Self::search_scored) of a query already split into its words: each
    /// distinct word one BM25 term scorer, weighted by its count in the query (Lucene's bag
    /// of words), the best `limit` found by [`max_score::top_k`].
    fn search_words(&self, words: &[String], limit: usize) -> Result<Vec<(f32, usize)>, EnvError> {
        let (Some(rows), [segment]) = (&self.rows, self.searcher.segment_readers()) else {
            return Ok(Vec::new());
        };
        let mut distinct: Vec<(&str, u32)> = Vec::new();
        for word in words {
            match distinct.iter_mut().find(|(w, _)| w == word) {
                Some((_, count)) => *count += 1,
                None => distinct.push((word, 1)),
            }
        }
        let postings = segment
            .inverted_index(self.contents)
            .map_err(search_error)?;
        let fieldnorms = segment
            .get_fieldnorms_reader(self.contents)
            .map_err(search_error)?;
        let mut lists = Vec::new();
        for (slot, (word, count)) in distinct.iter().enumerate() {
            let term = Term::from_field_text(self.contents, word);
            let Some(list) = postings
                .read_postings(&term, IndexRecordOption::WithFreqs)
                .map_err(|e| search_error(e.into()))?
            else {
                continue;
            };
            let weight = Bm25Weight::for_terms(&self.searcher, std::slice::from_ref(&term))
                .map_err(search_error)?;
            let windows = self.word_windows(word, || {
                let blocks = postings
                    .read_block_postings(&term, IndexRecordOption::WithFreqs)
                    .map_err(|e| search_error(e.into()))?
                    .unwrap_or_else(BlockSegmentPostings::empty);
                Ok(WordWindows::of(
                    blocks,
                    &fieldnorms,
                    &weight,
                    segment.max_doc(),
                ))
            })?;
            lists.push(WordList::new(
                list,
                fieldnorms.clone(),
                weight,
                (*count, slot),
                windows,
            ));
        }
        Ok(
            max_score::top_k(lists, distinct.len(), limit, segment.max_doc())
                .into_iter()
                .filter_map(|(score, doc)| rows.first(doc).map(|r| (score, r as usize)))
                .collect(),
        )
    }

    /// The window-max index of `word`, made by `make` on the word's first search and kept
    /// while it is among the last [`KEPT_WORD_WINDOWS`] words made (the index is read-only).
    fn word_windows(
        &self,
        word: &str,
        make: impl FnOnce() -> Result<WordWindows, EnvError>,
    ) -> Result<Arc<WordWindows>, EnvError> {
        let kept = entry(&self.windows, word);
        from_text(kept.get_or_init(|| as_text(make().map(Arc::new))))
    }

    /// The rows of the top [`SEARCH_RETURN_N`] products for `query`, best first; an answer
    /// kept from an earlier search of the same words when there is one (see the module doc).
    pub fn search(&self, query: &str) -> Result<Vec<usize>, EnvError> {
        let words = self.words(query);
        let answer = entry(&self.answers, &words.join(" "));
        from_text(answer.get_or_init(|| {
            as_text(self.search_words(&words, SEARCH_RETURN_N))
                .map(|hits| hits.into_iter().map(|(_, row)| row).collect())
        }))
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
