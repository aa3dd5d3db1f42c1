//! Rows that hold a prefix once and several continuations of it after one another: the
//! layout of Prefix Grouper (Liu et al. 2025, "Prefix Grouper: Efficient GRPO Training
//! through Shared-Prefix Forward", arXiv 2506.05433; verl's `use_prefix_grouper`).
//!
//! A GRPO group's samples repeat one prompt and differ only in their replies. Written as
//! one row `[prefix | branch₁ | branch₂ | …]`, with every branch at the rotary positions
//! that follow the prefix and a mask that lets a branch token read the prefix and the
//! earlier tokens of its own branch only, each token sees exactly the keys, at exactly the
//! positions, it sees in its own sequence. So every hidden state, log-prob and gradient is
//! the per-sample pass's (up to the order of float sums), and the prefix is computed once
//! instead of once per sample.

/// One row of a prefix-grouped block: columns `0..prefix` are the shared prefix, branch k
/// fills columns `starts[k]..starts[k + 1]` (the last one up to the row's end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefixBranches {
    /// Columns of the shared prefix.
    pub prefix: usize,
    /// First column of every branch, ascending, none before `prefix`.
    pub starts: Vec<usize>,
}

impl PrefixBranches {
    /// The first key column a query at column `own` may read after the prefix: its own
    /// branch's first column (0 inside the prefix, where attention is plainly causal).
    pub fn branch_start(&self, own: usize) -> usize {
        if own < self.prefix {
            return 0;
        }
        let k = self.starts.partition_point(|&s| s <= own);
        k.checked_sub(1).map_or(self.prefix, |k| self.starts[k])
    }

    /// Whether a query at column `own` may read key column `key`: causal, and the key is in
    /// the prefix or in the query's own branch.
    pub fn sees(&self, own: usize, key: usize) -> bool {
        key <= own && (key < self.prefix || key >= self.branch_start(own))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prefix of 2, branches at columns 2..4 and 4..5, then padding (column 5).
    #[test]
    fn a_branch_reads_the_prefix_and_its_own_earlier_tokens() {
        let row = PrefixBranches {
            prefix: 2,
            starts: vec![2, 4],
        };
        let seen = |own: usize| -> Vec<usize> { (0..6).filter(|&k| row.sees(own, k)).collect() };
        assert_eq!(seen(0), [0]);
        assert_eq!(seen(1), [0, 1]);
        assert_eq!(seen(2), [0, 1, 2]);
        assert_eq!(seen(3), [0, 1, 2, 3]);
        // The second branch skips the first one's columns 2 and 3.
        assert_eq!(seen(4), [0, 1, 4]);
        // Padding after the last branch reads as its continuation: never fully masked.
        assert_eq!(seen(5), [0, 1, 4, 5]);
        // A row of one plain sequence: the prefix is all of it, attention is causal.
        let plain = PrefixBranches {
            prefix: 3,
            starts: Vec::new(),
        };
        assert_eq!((0..3).filter(|&k| plain.sees(2, k)).count(), 3);
        assert!(!plain.sees(1, 2));
    }
}
