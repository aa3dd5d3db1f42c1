//! The block a scoring pass runs on: one sequence a row (right-padded), or the sequences
//! that share a prompt in one row, their common prefix once and then each one's rest
//! ([`crate::qwen2::PrefixBranches`], Prefix Grouper).
//!
//! Sequences are grouped by their prompt, the tokens before their first response token
//! (the whole sequence when it has none), in order of first appearance. A group's row holds
//! the members' longest common prefix, which covers the prompt and may reach into replies
//! that start alike, then each member's tokens after it: in a GRPO group of eight
//! single-turn samples of a 210-token prompt and 15-token replies that is 330 columns
//! where one sequence a row computes 1,800. A group of one is a plain causal row.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use std::collections::HashMap;

use super::packed::{padded_ids, PackedSequences};
use super::qwen2::{AttentionLayout, PrefixBranches};

/// Token ids `[rows, width]` (0 pads), their attention layout, and where each sequence's
/// tokens sit.
#[derive(Clone, Debug)]
pub struct ScoringBlock {
    ids: Vec<i64>,
    width: usize,
    /// Positions and visibility of the block's tokens.
    pub layout: AttentionLayout,
    /// Per sequence: its row, the row's prefix length and its branch's first column.
    place: Vec<(usize, usize, usize)>,
}

impl ScoringBlock {
    /// One sequence a row, right-padded, from position 0 ([`AttentionLayout::right_padded`]).
    pub fn one_per_row(packed: &PackedSequences) -> Self {
        let width = packed.max_len();
        let place = (0..packed.len()).map(|i| (i, width, width)).collect();
        ScoringBlock {
            ids: padded_ids((0..packed.len()).map(|i| packed.sequence(i)), width),
            width,
            layout: AttentionLayout::right_padded(packed.len(), width),
            place,
        }
    }

    /// The sequences that share a prompt ([`prompt_groups`]) in one row each: their
    /// longest common prefix once, then every member's rest as a branch at the positions
    /// after the prefix.
    pub fn prefix_grouped(packed: &PackedSequences, response_mask: &[bool]) -> Self {
        let groups = prompt_groups(packed, response_mask);
        let mut rows = Vec::with_capacity(groups.len());
        let mut positions = Vec::with_capacity(groups.len());
        let mut branches = Vec::with_capacity(groups.len());
        let mut place = vec![(0, 0, 0); packed.len()];
        for (row, members) in groups.iter().enumerate() {
            let first = packed.sequence(members[0]);
            let prefix = (members.iter().skip(1))
                .map(|&m| common_prefix(first, packed.sequence(m)))
                .fold(first.len(), usize::min);
            let mut tokens = first[..prefix].to_vec();
            let mut row_positions: Vec<usize> = (0..prefix).collect();
            let mut starts = Vec::new();
            for &m in members {
                let rest = &packed.sequence(m)[prefix..];
                place[m] = (row, prefix, tokens.len());
                if !rest.is_empty() {
                    starts.push(tokens.len());
                    tokens.extend_from_slice(rest);
                    row_positions.extend(prefix..prefix + rest.len());
                }
            }
            rows.push(tokens);
            positions.push(row_positions);
            branches.push(PrefixBranches { prefix, starts });
        }
        let width = rows.iter().map(Vec::len).max().unwrap_or(0);
        for p in &mut positions {
            let next = p.len();
            p.extend(next..width);
        }
        ScoringBlock {
            ids: padded_ids(rows.iter().map(Vec::as_slice), width),
            width,
            layout: AttentionLayout {
                key_start: vec![0; rows.len()],
                positions,
                branches: Some(branches),
            },
            place,
        }
    }

    /// `(row, column)` of token `pos` of sequence `seq`.
    pub fn column(&self, seq: usize, pos: usize) -> (usize, usize) {
        let (row, prefix, start) = self.place[seq];
        match pos < prefix {
            true => (row, pos),
            false => (row, start + pos - prefix),
        }
    }

    /// Rows × columns of the block (what a pass over it computes).
    pub fn size(&self) -> (usize, usize) {
        (self.layout.batch(), self.width)
    }

    /// The token ids `[rows, width]` on `device`.
    pub fn ids<B: Backend>(&self, device: &B::Device) -> Tensor<B, 2, Int> {
        let shape = [self.layout.batch(), self.width];
        Tensor::from_data(TensorData::new(self.ids.clone(), shape), device)
    }
}

/// The sequences of `packed` grouped by prompt (the tokens before the first token marked
/// in `response_mask`, all of them when none is), groups and members in order of first
/// appearance.
pub fn prompt_groups(packed: &PackedSequences, response_mask: &[bool]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut index: HashMap<&[u32], usize> = HashMap::new();
    for i in 0..packed.len() {
        let range = packed.offsets[i]..packed.offsets[i + 1];
        let prompt_end = (range.clone())
            .find(|&t| response_mask[t])
            .unwrap_or(range.end);
        let prompt = &packed.tokens[range.start..prompt_end];
        match index.get(prompt) {
            Some(&g) => groups[g].push(i),
            None => {
                index.insert(prompt, groups.len());
                groups.push(vec![i]);
            }
        }
    }
    groups
}

/// Length of the common prefix of `a` and `b`.
fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three samples of one prompt `[1, 2, 3]` (replies `4 5`, `4 6`, `7`), one of another
    /// prompt, and a copy of the first: the group's common prefix reaches into the replies
    /// only as far as all of them agree (not at all: `7` differs at once).
    #[test]
    fn samples_of_one_prompt_share_a_row() {
        let seqs = [
            vec![1u32, 2, 3, 4, 5],
            vec![9, 3, 4],
            vec![1, 2, 3, 4, 6],
            vec![1, 2, 3, 7],
            vec![1, 2, 3, 4, 5],
        ];
        let packed = PackedSequences::from_sequences(&seqs);
        let reply = |s: &[u32], prompt: usize| (0..s.len()).map(move |i| i >= prompt);
        let mask: Vec<bool> = [3, 2, 3, 3, 3]
            .iter()
            .zip(&seqs)
            .flat_map(|(&p, s)| reply(s, p))
            .collect();
        assert_eq!(prompt_groups(&packed, &mask), [vec![0, 2, 3, 4], vec![1]]);
        let block = ScoringBlock::prefix_grouped(&packed, &mask);
        assert_eq!(block.size(), (2, 10));
        #[rustfmt::skip]
        assert_eq!(block.ids, [
            1, 2, 3, 4, 5, 4, 6, 7, 4, 5,
            9, 3, 4, 0, 0, 0, 0, 0, 0, 0,
        ]);
        let branches = block.layout.branches.as_ref().unwrap();
        assert_eq!(
            branches[0],
            PrefixBranches {
                prefix: 3,
                starts: vec![3, 5, 7, 8]
            }
        );
        assert_eq!(
            branches[1],
            PrefixBranches {
                prefix: 3,
                starts: vec![]
            }
        );
        assert_eq!(block.layout.positions[0], [0, 1, 2, 3, 4, 3, 4, 3, 3, 4]);
        // Sequence 2's token 4 (its `6`) sits at column 6, its token 2 in the prefix.
        assert_eq!(block.column(2, 4), (0, 6));
        assert_eq!(block.column(2, 2), (0, 2));
        assert_eq!(block.column(3, 3), (0, 7));
        assert_eq!(block.column(1, 2), (1, 2));
    }

    /// Identical samples leave no branch: the prefix is all of them.
    #[test]
    fn identical_samples_are_all_prefix() {
        let seqs = [vec![1u32, 2, 3], vec![1, 2, 3]];
        let packed = PackedSequences::from_sequences(&seqs);
        let mask = [false, true, true, false, true, true];
        let block = ScoringBlock::prefix_grouped(&packed, &mask);
        assert_eq!(block.size(), (1, 3));
        assert_eq!(block.column(1, 2), (0, 2));
    }
}
