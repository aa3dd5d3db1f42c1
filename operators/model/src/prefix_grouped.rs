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
//!
//! A group is one row only where that holds less than its members one a row. A row's
//! attention is dense over its columns (the branches mask each other out but are computed),
//! so per layer autodiff keeps scores and probabilities for every pair of its columns
//! (2 · heads floats) beside each token's activations, of which the SwiGLU's three
//! intermediate vectors are the largest (3 · intermediate floats). With that pair cost
//! `r = 2·heads / (3·intermediate)` in token units, a group of rows `Lᵢ` and grouped row
//! `L` is kept when `L + r·L² ≤ Σ (Lᵢ + r·Lᵢ²)`. Single-turn GRPO groups always pass (the
//! group above: 330 + 425 against 1,800 + 1,582 at SmolLM2's r = 1/256); eight 5-turn
//! FrozenLake trajectories of about 600 tokens off a 250-token first prompt do not (a
//! 3,050-column row: 3,050 + 36,300 against 4,800 + 11,300), and are scored one a row.

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
    /// after the prefix; a group whose row would hold more than its members apart, at
    /// `pair_cost` ([`pair_cost`]; 0 groups every prompt), is split one sequence a row.
    pub fn prefix_grouped(
        packed: &PackedSequences,
        response_mask: &[bool],
        pair_cost: f64,
    ) -> Self {
        // Each row's members and the prefix they share (a lone sequence's is all of it).
        let groups = (prompt_groups(packed, response_mask).into_iter())
            .flat_map(|members| {
                let prefix = shared_prefix(packed, &members);
                match pays_off(packed, &members, prefix, pair_cost) {
                    true => vec![(members, prefix)],
                    false => (members.into_iter())
                        .map(|m| (vec![m], packed.sequence(m).len()))
                        .collect(),
                }
            })
            .collect::<Vec<_>>();
        let mut rows = Vec::with_capacity(groups.len());
        let mut positions = Vec::with_capacity(groups.len());
        let mut branches = Vec::with_capacity(groups.len());
        let mut place = vec![(0, 0, 0); packed.len()];
        for (row, (members, prefix)) in groups.iter().enumerate() {
            let (first, prefix) = (packed.sequence(members[0]), *prefix);
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

/// The memory of one attention pair in token units, per layer (module doc): scores and
/// probabilities, `2 · heads` floats, over a token's SwiGLU intermediates, `3 ·
/// intermediate` floats.
pub fn pair_cost(heads: usize, intermediate: usize) -> f64 {
    2.0 * heads as f64 / (3.0 * intermediate.max(1) as f64)
}

/// Whether `members`, sharing their first `prefix` tokens, in one row hold no more than one
/// a row: `L + r·L² ≤ Σ (Lᵢ + r·Lᵢ²)` (module doc).
fn pays_off(packed: &PackedSequences, members: &[usize], prefix: usize, pair_cost: f64) -> bool {
    let cost = |len: usize| len as f64 + pair_cost * (len * len) as f64;
    let rests: usize = members
        .iter()
        .map(|&m| packed.sequence(m).len() - prefix)
        .sum();
    let apart: f64 = members
        .iter()
        .map(|&m| cost(packed.sequence(m).len()))
        .sum();
    cost(prefix + rests) <= apart
}

/// The longest prefix every member of a group shares.
fn shared_prefix(packed: &PackedSequences, members: &[usize]) -> usize {
    let first = packed.sequence(members[0]);
    (members.iter().skip(1))
        .map(|&m| common_prefix(first, packed.sequence(m)))
        .fold(first.len(), usize::min)
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
        let block = ScoringBlock::prefix_grouped(&packed, &mask, 0.0);
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

    /// Long replies off a short prompt are scored one a row: three 40-token replies of a
    /// 2-token prompt make a 122-column row, 122 + 0.1·122² = 1,610 against
    /// 3 · (42 + 0.1·42²) = 655 apart at pair cost 0.1; at pair cost 0 they share a row.
    /// A second prompt's two 1-token replies stay grouped (4 + 1.6 against 6 + 1.8).
    #[test]
    fn a_group_whose_row_costs_more_is_split_one_a_row() {
        let long = |t: u32| [vec![1u32, 2], vec![t; 40]].concat();
        let seqs = [long(3), vec![5, 6, 7], long(4), long(8), vec![5, 6, 9]];
        let prompts = [2, 2, 2, 2, 2];
        let packed = PackedSequences::from_sequences(&seqs);
        let mask: Vec<bool> = (seqs.iter().zip(prompts))
            .flat_map(|(s, p)| (0..s.len()).map(move |i| i >= p))
            .collect();
        let grouped = ScoringBlock::prefix_grouped(&packed, &mask, 0.0);
        assert_eq!(grouped.size(), (2, 122));
        let split = ScoringBlock::prefix_grouped(&packed, &mask, 0.1);
        assert_eq!(split.size(), (4, 42));
        let branches = split.layout.branches.as_ref().unwrap();
        let plain = |len| PrefixBranches {
            prefix: len,
            starts: vec![],
        };
        assert_eq!(branches[0], plain(42));
        assert_eq!(branches[1], plain(42));
        assert_eq!(branches[2], plain(42));
        assert_eq!(
            branches[3],
            PrefixBranches {
                prefix: 2,
                starts: vec![2, 3]
            }
        );
        // Sequence 2's token 30 sits in its own row (the second), the second prompt's
        // group after the three split rows.
        assert_eq!(split.column(2, 30), (1, 30));
        assert_eq!(split.column(4, 2), (3, 3));
    }

    /// At SmolLM2's pair cost (9 heads, intermediate 1536: 1/256) a single-turn GRPO group
    /// (8 replies of 15 tokens to a 210-token prompt) shares a row and a multi-turn one (8
    /// trajectories going on 350 tokens past a 240-token first prompt) is split.
    #[test]
    fn smollm2_groups_single_turn_samples_and_splits_multi_turn_ones() {
        assert_eq!(pair_cost(9, 1536), 1.0 / 256.0);
        let group = |prompt: usize, rest: usize| {
            let seqs: Vec<Vec<u32>> = (0..8u32)
                .map(|i| [vec![1u32; prompt], vec![100 + i; rest]].concat())
                .collect();
            let mask: Vec<bool> = (seqs.iter())
                .flat_map(|s| (0..s.len()).map(move |i| i >= prompt))
                .collect();
            let packed = PackedSequences::from_sequences(&seqs);
            ScoringBlock::prefix_grouped(&packed, &mask, pair_cost(9, 1536)).size()
        };
        assert_eq!(group(210, 15), (1, 210 + 8 * 15));
        assert_eq!(group(240, 350), (8, 590));
    }

    /// Identical samples leave no branch: the prefix is all of them.
    #[test]
    fn identical_samples_are_all_prefix() {
        let seqs = [vec![1u32, 2, 3], vec![1, 2, 3]];
        let packed = PackedSequences::from_sequences(&seqs);
        let mask = [false, true, true, false, true, true];
        let block = ScoringBlock::prefix_grouped(&packed, &mask, 0.0);
        assert_eq!(block.size(), (1, 3));
        assert_eq!(block.column(1, 2), (0, 2));
    }
}
