//! Observation similarity for GiGPO's similarity-threshold anchor groups.
//!
//! verl-agent's similarity mode compares observation strings with Python's
//! `difflib.SequenceMatcher(None, a, b).ratio()`: the Ratcliff/Obershelp ratio
//! 2·M/(|a| + |b|), where M is the number of characters in the matching blocks found by
//! taking the longest common substring (earliest on ties) and recursing on both sides.
//! This is that ratio with `autojunk=False` (no "popular character" heuristic), over
//! Unicode scalar values; two empty strings have ratio 1.
//!
//! Clustering (verl-agent `similarity`-based `build_step_group`): observations are visited in
//! batch order; each joins the first existing cluster whose first member has ratio ≥
//! threshold, else starts a new cluster.

/// difflib's `SequenceMatcher.ratio()` with `autojunk=False`.
pub fn ratio(a: &str, b: &str) -> f64 {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let m = matched(&a, &b, 0, a.len(), 0, b.len());
    2.0 * m as f64 / (a.len() + b.len()) as f64
}

/// Characters matched by the recursive longest-block decomposition of a[alo..ahi], b[blo..bhi].
fn matched(a: &[char], b: &[char], alo: usize, ahi: usize, blo: usize, bhi: usize) -> usize {
    let (i, j, k) = longest_match(a, b, alo, ahi, blo, bhi);
    if k == 0 {
        return 0;
    }
    k + matched(a, b, alo, i, blo, j) + matched(a, b, i + k, ahi, j + k, bhi)
}

/// Longest common block (start in a, start in b, length); ties go to the smallest start in
/// a, then in b, exactly as difflib's `find_longest_match` without junk.
fn longest_match(
    a: &[char],
    b: &[char],
    alo: usize,
    ahi: usize,
    blo: usize,
    bhi: usize,
) -> (usize, usize, usize) {
    let (mut best_i, mut best_j, mut best) = (alo, blo, 0);
    let mut prev = vec![0usize; bhi - blo + 1];
    for (i, &ai) in a.iter().enumerate().take(ahi).skip(alo) {
        let mut cur = vec![0usize; bhi - blo + 1];
        for j in blo..bhi {
            if ai == b[j] {
                let k = prev[j - blo] + 1;
                cur[j - blo + 1] = k;
                if k > best {
                    best = k;
                    best_i = i + 1 - k;
                    best_j = j + 1 - k;
                }
            }
        }
        prev = cur;
    }
    (best_i, best_j, best)
}

/// Cluster ids (dense, in order of appearance) of `texts` under the threshold rule.
pub fn cluster(texts: &[&str], threshold: f64) -> Vec<usize> {
    let mut representatives: Vec<usize> = Vec::new();
    let mut ids = Vec::with_capacity(texts.len());
    for (i, text) in texts.iter().enumerate() {
        match representatives
            .iter()
            .position(|&r| ratio(texts[r], text) >= threshold)
        {
            Some(c) => ids.push(c),
            None => {
                ids.push(representatives.len());
                representatives.push(i);
            }
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_python_difflib() {
        // Values from CPython 3 difflib.SequenceMatcher(None, a, b, autojunk=False).ratio().
        assert_eq!(ratio("abcd", "bcde"), 0.75);
        assert_eq!(ratio("ab", "ba"), 0.5);
        assert!((ratio("P _ _ G\n_ O _ _", "_ P _ G\n_ O _ _") - 0.8666666666666667).abs() < 1e-12);
        assert_eq!(ratio("", ""), 1.0);
        assert_eq!(ratio("abc", ""), 0.0);
    }

    #[test]
    fn clusters_by_first_member() {
        let texts = ["abcdefghij", "abcdefghiX", "zzzzzzzzzz", "abcdefghij"];
        assert_eq!(cluster(&texts, 0.9), vec![0, 0, 1, 0]);
        assert_eq!(cluster(&texts, 1.0), vec![0, 1, 2, 0]);
    }
}
