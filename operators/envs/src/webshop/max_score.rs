//! The k best documents of a bag of words by block-max MaxScore (Turtle & Flood 1995, with
//! window maxima as in Lucene's `MaxScoreBulkScorer`), over tantivy's postings and BM25.
//!
//! tantivy answers a disjunction with block-max WAND, which sorts its term cursors by
//! document again after every step. An instruction is about 20 words, and at a million
//! products that bookkeeping was most of a search (`block_wand` 60% of the profile, its
//! sort 8%; bench/history/webshop.md). Here:
//!
//! - Each word has a window-max index ([`WordWindows`]): the highest score it reaches in
//!   each window of [`WINDOW_DOCS`] documents. Summed over the query's words, it bounds
//!   every document of a window.
//! - **First look.** The [`FIRST_LOOK_WINDOWS`] windows with the highest bounds are scored
//!   first, with a second set of cursors. The catalog keeps similar products side by side,
//!   so the best matches are usually there, and θ, the k-th best score, starts near its
//!   final value instead of rising slowly from the first documents.
//! - **The pass**, in document order over the other windows: a window whose bound is at
//!   most θ is skipped without reading a posting. In the others, the words are ordered by
//!   their bound in the window; the lowest whose bounds sum to at most θ are
//!   *non-essential*: a document only they contain cannot get above θ. Candidates are the
//!   documents of the essential words; a candidate's non-essential words are looked up (a
//!   forward seek each), highest bound first, only while its score plus the bounds still to
//!   look up can exceed θ.
//!
//! The answer is tantivy's `TopDocs::order_by_score` over the same words: the k best by
//! score, ties to the lower document. A document's score is summed in the words' order, so
//! equal documents score equally; against tantivy's own sums it may differ in the last bit.
//! Bounds are raised by [`BOUND_MARGIN`], so a pruned document scores below θ whatever the
//! order of its sum.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::Arc;

use tantivy::fieldnorm::FieldNormReader;
use tantivy::postings::{BlockSegmentPostings, Postings, SegmentPostings};
use tantivy::query::Bm25Weight;
use tantivy::{DocId, DocSet, Score, TERMINATED};

/// Documents per window: the unit of the window-max index and of skipping (tantivy's
/// posting block size; 64 and 1,024 were slower at a million products).
pub const WINDOW_DOCS: DocId = 128;

/// Windows scored first (see the module doc).
pub const FIRST_LOOK_WINDOWS: usize = 4;

/// The fraction bounds are raised by, more than f32 sums of ~20 terms in another order
/// can differ by.
pub const BOUND_MARGIN: Score = 1e-5;

/// A word's window-max index: the highest score it has in each window of [`WINDOW_DOCS`]
/// documents, zero where it has none. Kept in steps of 1/255 of the word's best score,
/// rounded up (a byte a window: 7.8 KB a word at a million products).
pub struct WordWindows {
    steps: Vec<u8>,
    /// One step's score.
    step: Score,
}

impl WordWindows {
    /// The windows of `postings` in an index of `max_doc` documents, scored by `weight`
    /// with the documents' lengths.
    pub fn of(
        mut postings: BlockSegmentPostings,
        fieldnorms: &FieldNormReader,
        weight: &Bm25Weight,
        max_doc: DocId,
    ) -> WordWindows {
        let mut max: Vec<Score> = vec![0.0; max_doc.div_ceil(WINDOW_DOCS) as usize];
        let mut left = postings.doc_freq() as usize;
        while left > 0 && postings.block_len() > 0 {
            for (&doc, &tf) in postings.docs().iter().zip(postings.freqs()) {
                let best = &mut max[(doc / WINDOW_DOCS) as usize];
                *best = best.max(weight.score(fieldnorms.fieldnorm_id(doc), tf));
            }
            left = left.saturating_sub(postings.block_len());
            postings.advance();
        }
        let best = max.iter().copied().fold(0.0, Score::max);
        let step = best / 255.0 * (1.0 + BOUND_MARGIN);
        let steps = max
            .iter()
            .map(|&m| {
                if m > 0.0 {
                    (m / step).ceil().min(255.0) as u8
                } else {
                    0
                }
            })
            .collect();
        WordWindows { steps, step }
    }

    /// An upper bound of the word's score in window `w` (one occurrence in the query).
    fn bound(&self, w: usize) -> Score {
        Score::from(self.steps[w]) * self.step
    }
}

/// One word of a query: its postings (twice: one cursor for the first look, one for the
/// pass), how they are scored, its windows and its place in the query.
pub struct WordList {
    postings: SegmentPostings,
    first_look: SegmentPostings,
    fieldnorms: FieldNormReader,
    /// The word's BM25 weight times its count in the query.
    weight: Bm25Weight,
    count: Score,
    windows: Arc<WordWindows>,
    /// The word's position among the query's words (the order scores are summed in).
    slot: usize,
    /// The word's bound in the current window.
    bound: Score,
}

impl WordList {
    /// The word in query position `slot`, `count` times in the query, with its postings
    /// (a second cursor is a copy), its documents' lengths, its one-occurrence BM25 weight
    /// and its windows.
    pub fn new(
        postings: SegmentPostings,
        fieldnorms: FieldNormReader,
        weight: Bm25Weight,
        (count, slot): (u32, usize),
        windows: Arc<WordWindows>,
    ) -> WordList {
        WordList {
            first_look: postings.clone(),
            postings,
            fieldnorms,
            weight: weight.boost_by(count as Score),
            count: count as Score,
            windows,
            slot,
            bound: 0.0,
        }
    }

    /// The word's BM25 score in the document its cursor is on (tantivy's `TermScorer::score`).
    fn score(&self) -> Score {
        let fieldnorm_id = self.fieldnorms.fieldnorm_id(self.postings.doc());
        self.weight.score(fieldnorm_id, self.postings.term_freq())
    }
}

/// A hit, ordered from worse to better: lower score, then higher document.
#[derive(Clone, Copy, PartialEq)]
struct Hit {
    score: Score,
    doc: DocId,
}

impl Eq for Hit {}

impl Ord for Hit {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.doc.cmp(&self.doc))
    }
}

impl PartialOrd for Hit {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The k best hits so far.
struct TopK {
    k: usize,
    worst_first: BinaryHeap<Reverse<Hit>>,
}

impl TopK {
    /// θ: a document whose bound is at most this cannot join.
    fn threshold(&self) -> Score {
        match self.worst_first.peek() {
            Some(worst) if self.worst_first.len() == self.k => worst.0.score,
            _ => Score::MIN,
        }
    }

    fn offer(&mut self, hit: Hit) {
        match self.worst_first.peek() {
            Some(worst) if self.worst_first.len() == self.k && hit <= worst.0 => {}
            _ => {
                self.worst_first.push(Reverse(hit));
                if self.worst_first.len() > self.k {
                    self.worst_first.pop();
                }
            }
        }
    }
}

/// The `k` best `(score, doc)` of `lists`, the words of a query of `slots` distinct words,
/// among `max_doc` documents, best first.
pub fn top_k(
    mut lists: Vec<WordList>,
    slots: usize,
    k: usize,
    max_doc: DocId,
) -> Vec<(Score, DocId)> {
    // totals[w]: the most any document of window w can score.
    let mut totals: Vec<Score> = vec![0.0; max_doc.div_ceil(WINDOW_DOCS) as usize];
    for list in &lists {
        let step = list.windows.step * list.count;
        for (total, &steps) in totals.iter_mut().zip(&list.windows.steps) {
            *total += Score::from(steps) * step;
        }
    }
    for total in &mut totals {
        *total *= 1.0 + BOUND_MARGIN;
    }
    let mut by_total: Vec<(Score, usize)> = totals.iter().copied().zip(0..).collect();
    let looked = FIRST_LOOK_WINDOWS.min(by_total.len());
    if k == 0 || looked == 0 || lists.is_empty() {
        return Vec::new();
    }
    by_total.select_nth_unstable_by(looked - 1, |a, b| b.0.total_cmp(&a.0));
    let mut first: Vec<usize> = by_total[..looked].iter().map(|&(_, w)| w).collect();
    first.sort_unstable();

    let mut pass = Pass {
        top: TopK {
            k,
            worst_first: BinaryHeap::with_capacity(k.min(1 << 16) + 1),
        },
        parts: vec![0.0; slots],
        order: Vec::with_capacity(lists.len()),
        reach: Vec::with_capacity(lists.len()),
        max_doc,
    };
    let swap_cursors = |lists: &mut [WordList]| {
        for list in lists {
            std::mem::swap(&mut list.postings, &mut list.first_look);
        }
    };
    swap_cursors(&mut lists);
    for &w in &first {
        pass.window(&mut lists, w);
    }
    swap_cursors(&mut lists);
    for (w, &total) in totals.iter().enumerate() {
        if total > pass.top.threshold() && first.binary_search(&w).is_err() {
            pass.window(&mut lists, w);
        }
    }
    let mut hits: Vec<Hit> = pass.top.worst_first.into_iter().map(|h| h.0).collect();
    hits.sort_by(|a, b| b.cmp(a));
    hits.into_iter().map(|hit| (hit.score, hit.doc)).collect()
}

/// The state of a search's walk over windows.
struct Pass {
    top: TopK,
    /// Each query word's score in the current candidate, by slot.
    parts: Vec<Score>,
    /// The words present in the window, by bound, lowest first.
    order: Vec<usize>,
    /// reach[p]: the most words order[..=p] add to a score.
    reach: Vec<Score>,
    max_doc: DocId,
}

impl Pass {
    /// Scores the candidates of window `w`: the documents of its essential words, each
    /// completed with the non-essential words while it can still exceed θ.
    fn window(&mut self, lists: &mut [WordList], w: usize) {
        let start = w as DocId * WINDOW_DOCS;
        let end = (start + WINDOW_DOCS).min(self.max_doc);
        for list in lists.iter_mut() {
            list.bound = list.windows.bound(w) * list.count * (1.0 + BOUND_MARGIN);
        }
        self.order.clear();
        self.order
            .extend((0..lists.len()).filter(|&i| lists[i].bound > 0.0));
        self.order
            .sort_by(|&a, &b| lists[a].bound.total_cmp(&lists[b].bound));
        self.reach.clear();
        let mut sum = 0.0;
        for &i in &self.order {
            sum += lists[i].bound;
            self.reach.push(sum);
        }
        let mut first_essential = self.non_essential();
        for &i in &self.order[first_essential..] {
            if lists[i].postings.doc() < start {
                lists[i].postings.seek(start);
            }
        }
        while first_essential < self.order.len() {
            let essential = &self.order[first_essential..];
            let doc = essential
                .iter()
                .map(|&i| lists[i].postings.doc())
                .min()
                .unwrap_or(TERMINATED);
            if doc >= end {
                break;
            }
            let mut partial = 0.0;
            for &i in essential {
                let list = &mut lists[i];
                if list.postings.doc() == doc {
                    let score = list.score();
                    self.parts[list.slot] = score;
                    partial += score;
                    list.postings.advance();
                }
            }
            if self.complete(lists, first_essential, doc, partial) {
                let score = self.parts.iter().sum();
                self.top.offer(Hit { score, doc });
                first_essential = first_essential.max(self.non_essential());
            }
            self.parts.fill(0.0);
        }
    }

    /// How many of the window's words are non-essential under θ.
    fn non_essential(&self) -> usize {
        let threshold = self.top.threshold();
        self.reach.iter().take_while(|&&r| r <= threshold).count()
    }

    /// Adds the non-essential words of `doc` to its parts, highest bound first; false as
    /// soon as its score cannot exceed θ.
    fn complete(
        &mut self,
        lists: &mut [WordList],
        first_essential: usize,
        doc: DocId,
        mut partial: Score,
    ) -> bool {
        for p in (0..first_essential).rev() {
            if partial + self.reach[p] <= self.top.threshold() {
                return false;
            }
            let list = &mut lists[self.order[p]];
            if list.postings.doc() < doc {
                list.postings.seek(doc);
            }
            if list.postings.doc() == doc {
                let score = list.score();
                self.parts[list.slot] = score;
                partial += score;
            }
        }
        true
    }
}
