//! Walking a batch for an update: epochs of shuffled mini-batches (one optimizer step
//! each), each cut into micro-batches whose gradients are accumulated
//! ([`train_epochs`]), with the loss divisor that makes the accumulated gradient the whole
//! mini-batch's ([`loss_divisor`]); and the chunks scoring cuts a batch into.

use roll_flow_engine::collective::Collective;
use roll_flow_engine::stable_hash::{fnv1a, FNV_OFFSET};
use roll_flow_engine::Batch;

/// Tokens per forward pass when scoring: bounds activation memory, and cuts a CPU
/// pipeline's batch (20,000-40,000 tokens in the FrozenLake ones) into enough chunks to
/// score them concurrently on every core ([`crate::runtime::scoring::score_chunks`]).
pub const SCORING_CHUNK_TOKENS: usize = 8_192;

/// The batch in parts of `size` samples each, or whole, in batch order.
pub fn parts_of(batch: &Batch, size: Option<usize>) -> Vec<Batch> {
    let n = batch.num_samples();
    match size {
        Some(size) if size > 0 && size < n => batch.split(n.div_ceil(size)),
        _ => vec![batch.clone()],
    }
}

/// How a mini-batch is cut into micro-batches ([`micro_batches`]): the trainer's
/// `micro_batch`, `max_tokens_per_micro_batch` and `prefix_grouper`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MicroBatching {
    /// Samples per micro-batch at most (`None`: no count limit).
    pub samples: Option<usize>,
    /// Padded tokens per micro-batch at most, rows × the longest row (`None`: no limit).
    pub tokens: Option<usize>,
    /// Keep the samples of a prompt in the same micro-batch.
    pub by_prompt: bool,
}

/// The micro-batches of a mini-batch, cut from the samples sorted by length (stable), so
/// each part pads to a length close to its own samples'. The model runs right-padded rows
/// (`model::packed`); cut in batch order, a FrozenLake StarPO batch of whole chats (39 to
/// 319 tokens) computed 1.6x its real tokens in micro-batches of 64, and 1.23x sorted.
/// The accumulated gradient is the same whatever the parts are ([`train_epochs`] scales
/// each by its share of the loss divisor).
///
/// `samples` alone cuts parts of that many samples (as even as the count allows).
/// `tokens` packs the sorted samples greedily: a part takes the next sample while its rows
/// × its longest row stays within the budget and (with `samples`) its rows within the
/// count, so short samples share a micro-batch and long ones get one each (ROLL's dynamic
/// batching, `max_tokens_per_microbatch_in_train`; verl's `ppo_max_token_len_per_gpu`); a
/// sample longer than the budget is a part alone.
///
/// With `by_prompt` (`ActorStep(prefix_grouper: true)`) the samples that share a prompt
/// stay next to one another instead: prompt groups ordered by their longest sample
/// (stable), each group's samples in batch order, so a micro-batch of a multiple of the
/// group size holds whole groups, each scored as one row with its prompt once. `tokens`
/// does not apply there (`ActorStep` refuses the pair): a grouped row is as wide as its
/// prompt and every reply, not as its samples.
pub fn micro_batches(batch: &Batch, cut: MicroBatching) -> Vec<Batch> {
    let n = batch.num_samples();
    let within_count = cut.samples.is_none_or(|s| s == 0 || s >= n);
    let budget = cut.tokens.filter(|_| !cut.by_prompt);
    if within_count && budget.is_none() {
        return vec![batch.clone()];
    }
    let order = match cut.by_prompt {
        true => prompt_order(batch),
        false => batch.indices_by_length(),
    };
    let Some(budget) = budget else {
        return parts_of(&batch.select(&order), cut.samples);
    };
    let lengths: Vec<usize> = batch.lengths().collect();
    let max_rows = cut.samples.filter(|&s| s > 0).unwrap_or(usize::MAX);
    let mut parts: Vec<Vec<usize>> = Vec::new();
    let mut longest = 0;
    for i in order {
        if let Some(part) = parts.last_mut() {
            let (rows, width) = (part.len() + 1, longest.max(lengths[i]));
            if rows <= max_rows && rows.saturating_mul(width) <= budget {
                part.push(i);
                longest = width;
                continue;
            }
        }
        longest = lengths[i];
        parts.push(vec![i]);
    }
    parts.iter().map(|part| batch.select(part)).collect()
}

/// The samples grouped by prompt ([`roll_flow_model::prefix_grouped::prompt_groups`]),
/// groups by their longest sample (stable), samples in batch order within a group.
fn prompt_order(batch: &Batch) -> Vec<usize> {
    let mask = batch.bools(&roll_flow_engine::batch::column::RESPONSE_MASK);
    let Ok(mask) = mask else {
        return batch.indices_by_length();
    };
    let packed = crate::runtime::scoring::packed(batch);
    let mut groups = roll_flow_model::prefix_grouped::prompt_groups(&packed, mask);
    let lengths: Vec<usize> = batch.lengths().collect();
    groups.sort_by_key(|g| g.iter().map(|&i| lengths[i]).max());
    groups.concat()
}

/// The mini-batches of one epoch: the samples shuffled with `seed` (kept in order when the
/// whole batch is one mini-batch), cut into parts of `mini_batch` samples.
pub fn mini_batches(batch: &Batch, mini_batch: Option<usize>, seed: u64) -> Vec<Batch> {
    let n = batch.num_samples();
    if mini_batch.is_none_or(|m| m >= n) {
        return vec![batch.clone()];
    }
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
    parts_of(&batch.select(&order), mini_batch)
}

/// How [`train_epochs`] walks a batch: `epochs` shuffled passes (shuffled with `seed`), in
/// mini-batches and micro-batches ([`micro_batches`]) of the given sizes (`None`: whole),
/// the micro-batches shared by the workers of `collective`.
#[derive(Clone, Copy, Debug)]
pub struct EpochSchedule<'a> {
    pub epochs: usize,
    pub mini_batch: Option<usize>,
    pub micro: MicroBatching,
    pub seed: u64,
    pub collective: &'a Collective,
}

/// Runs `ppo_epochs` epochs of mini-batch updates: for each mini-batch, `micro` is called
/// with its micro-batches, their loss scales and their dropout seeds (to compute and
/// accumulate their gradients, [`crate::runtime::concurrent::part_gradients`]), then
/// `apply` takes the optimizer step. A micro-batch's dropout seed ([`part_seed`]) depends
/// on the schedule's seed, the epoch, the mini-batch and the micro-batch's place in it, not
/// on which worker computes it.
/// Statistics are averaged over micro-batches.
///
/// With several workers (each holding the step's whole batch, [`crate::rollout::gathered`])
/// every worker walks the same mini-batches and computes a share of their micro-batches
/// (balanced by padded tokens); `apply` sums the workers' gradients
/// ([`crate::runtime::trainable::Trainable::share_gradients`]) and the statistics of every
/// micro-batch are gathered, so the update and the statistics are a one-worker run's (up
/// to the order of the gradients' summation).
///
/// A micro-batch's scale is N_micro / N_mini: the loss's batch-wide divisor, as
/// `normalizer` computes it (e.g. [`loss_divisor`]), in the micro-batch over the one in
/// the mini-batch, so the accumulated gradient is the whole
/// mini-batch's, whatever `micro_batch` is (verl's and ROLL's 1 / micro-batches is exact
/// only for equal divisors).
pub fn train_epochs(
    batch: &Batch,
    schedule: EpochSchedule,
    stats: &mut StatMeans,
    normalizer: impl Fn(&Batch) -> Result<f64, String>,
    mut micro: impl FnMut(&[Batch], &[f32], &[u64]) -> Result<Vec<roll_flow_algo::AlgoStats>, String>,
    mut apply: impl FnMut() -> Result<crate::runtime::trainable::UpdateStats, String>,
) -> Result<(), String> {
    let EpochSchedule {
        epochs,
        mini_batch: mini,
        micro: cut,
        seed,
        collective,
    } = schedule;
    let (me, workers) = (collective.index(), collective.peers());
    for epoch in 0..epochs.max(1) {
        let epoch_seed = seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for (m, mini_batch) in mini_batches(batch, mini, epoch_seed).iter().enumerate() {
            let whole = normalizer(mini_batch)?;
            let parts: Vec<Batch> = micro_batches(mini_batch, cut)
                .into_iter()
                .filter(|p| p.num_samples() > 0)
                .collect();
            let scales = parts
                .iter()
                .map(|p| Ok((normalizer(p)? / whole) as f32))
                .collect::<Result<Vec<f32>, String>>()?;
            stats.add_sum("micro_batches", parts.len() as f64);
            let mine = shares(&parts, workers).swap_remove(me);
            let (parts, scales): (Vec<Batch>, Vec<f32>) = (mine.iter())
                .map(|&i| (parts[i].clone(), scales[i]))
                .unzip();
            let seeds: Vec<u64> = (mine.iter())
                .map(|&i| part_seed(epoch_seed, m, i))
                .collect();
            let computed = micro(&parts, &scales, &seeds)?;
            let every = if workers == 1 {
                computed
            } else {
                gathered_in_part_order(collective, mine, computed)?
            };
            for part_stats in every {
                for (k, v) in part_stats {
                    stats.add(&k, v);
                }
            }
            let update = apply()?;
            stats.add("grad_norm", update.grad_norm);
            stats.add("update_norm", update.update_norm);
            stats.add("lr", update.lr);
            stats.add_sum("skipped_nonfinite", if update.skipped { 1.0 } else { 0.0 });
            stats.add_sum("optimizer_steps", 1.0);
        }
    }
    Ok(())
}

/// The dropout seed of micro-batch `part` of mini-batch `mini_batch` in the epoch seeded
/// `epoch_seed`: FNV-1a over the three, stable across platforms.
pub fn part_seed(epoch_seed: u64, mini_batch: usize, part: usize) -> u64 {
    let parts = [epoch_seed, mini_batch as u64, part as u64];
    (parts.iter()).fold(FNV_OFFSET, |h, v| fnv1a(h, &v.to_le_bytes()))
}

/// Which micro-batches each of `workers` computes: the longest first, each to the worker
/// with the least work so far (padded tokens: rows × the longest row), ties to the lower
/// index; every worker computes the same answer. The micro-batches are cut from samples
/// sorted by length, so dealing them round robin would give one worker all the long ones.
fn shares(parts: &[Batch], workers: usize) -> Vec<Vec<usize>> {
    let cost = |p: &Batch| p.num_samples() * p.lengths().max().unwrap_or(0);
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(cost(&parts[i])), i));
    let mut load = vec![0usize; workers];
    let mut shares = vec![Vec::new(); workers];
    for i in order {
        let w = (0..workers)
            .min_by_key(|&w| (load[w], w))
            .expect("a worker");
        load[w] += cost(&parts[i]);
        shares[w].push(i);
    }
    for share in &mut shares {
        share.sort_unstable();
    }
    shares
}

/// Every worker's micro-batch statistics, in micro-batch order.
fn gathered_in_part_order(
    collective: &Collective,
    mine: Vec<usize>,
    computed: Vec<roll_flow_algo::AlgoStats>,
) -> Result<Vec<roll_flow_algo::AlgoStats>, String> {
    let all = collective
        .gather(&(mine, computed))
        .map_err(|e| format!("gathering the micro-batch statistics: {e}"))?;
    let mut indexed: Vec<(usize, roll_flow_algo::AlgoStats)> = all
        .into_iter()
        .flat_map(|(indices, stats)| indices.into_iter().zip(stats))
        .collect();
    indexed.sort_by_key(|(i, _)| *i);
    Ok(indexed.into_iter().map(|(_, s)| s).collect())
}

/// The batch-wide divisor of loss aggregation `agg` over `batch`'s response tokens
/// ([`roll_flow_kernels::loss_normalizer`] of each sample's response-token count).
pub fn loss_divisor(
    batch: &Batch,
    agg: roll_flow_algo::LossAgg,
    norm_length: Option<u32>,
) -> Result<f64, String> {
    let mask = batch
        .bools(&roll_flow_engine::batch::column::RESPONSE_MASK)
        .map_err(|e| e.to_string())?;
    let counts: Vec<f64> = (0..batch.num_samples())
        .map(|i| mask[batch.sample_range(i)].iter().filter(|&&m| m).count() as f64)
        .collect();
    Ok(roll_flow_kernels::loss_normalizer(
        &counts,
        agg,
        norm_length,
    ))
}

/// Running means of per-micro-batch statistics.
#[derive(Default)]
pub struct StatMeans {
    sums: std::collections::BTreeMap<String, (f64, usize)>,
}

impl StatMeans {
    pub fn add(&mut self, key: &str, value: f64) {
        let entry = self.sums.entry(key.to_string()).or_insert((0.0, 0));
        entry.0 += value;
        entry.1 += 1;
    }

    /// A statistic reported as a total rather than a mean.
    pub fn add_sum(&mut self, key: &str, value: f64) {
        let entry = self.sums.entry(key.to_string()).or_insert((0.0, 1));
        entry.0 += value;
    }

    pub fn into_metrics(self, metrics: &mut std::collections::BTreeMap<String, f64>) {
        for (k, (sum, n)) in self.sums {
            metrics.insert(k, sum / n.max(1) as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lengths of each micro-batch's samples.
    fn cut_lengths(lengths: &[usize], cut: MicroBatching) -> Vec<Vec<usize>> {
        let batch = Batch::from_sequences(lengths.iter().map(|&n| vec![1u32; n]));
        let parts = micro_batches(&batch, cut);
        parts.iter().map(|p| p.lengths().collect()).collect()
    }

    #[test]
    fn a_token_budget_packs_the_samples_by_length() {
        let lengths = [7, 1, 4, 2, 2, 9, 3];
        let within = |tokens, samples| MicroBatching {
            samples,
            tokens: Some(tokens),
            by_prompt: false,
        };
        // Sorted 1, 2, 2, 3, 4, 7, 9; budget 8 (rows × longest): 1, 2, 2 (3 × 2 = 6; with
        // the 3, 4 × 3 = 12), then 3, 4 (8), then 7 and 9 alone (9 is over the budget).
        assert_eq!(
            cut_lengths(&lengths, within(8, None)),
            [vec![1, 2, 2], vec![3, 4], vec![7], vec![9]]
        );
        // With at most two samples a part as well.
        assert_eq!(
            cut_lengths(&lengths, within(8, Some(2))),
            [vec![1, 2], vec![2, 3], vec![4], vec![7], vec![9]]
        );
        // A budget over the whole batch's padded size keeps it whole.
        assert_eq!(
            cut_lengths(&lengths, within(63, None)),
            [vec![1, 2, 2, 3, 4, 7, 9]]
        );
        // A count alone cuts as before: as even parts as the count allows.
        let count = MicroBatching {
            samples: Some(3),
            ..MicroBatching::default()
        };
        assert_eq!(
            cut_lengths(&lengths, count),
            [vec![1, 2], vec![2, 3], vec![4, 7, 9]]
        );
    }

    #[test]
    fn micro_batches_are_shared_by_padded_tokens_longest_first() {
        // Costs (rows × longest row): 2·1, 2·2, 2·3, 2·4 = 2, 4, 6, 8. Longest first: 8 to
        // worker 0, 6 to 1, 4 to 1 (6 < 8), 2 to 0 (8 < 10): loads 10 and 10.
        let part = |len: usize| Batch::from_sequences([vec![1u32; len], vec![1u32; len]]);
        let parts: Vec<Batch> = (1..=4).map(part).collect();
        assert_eq!(shares(&parts, 2), vec![vec![0, 3], vec![1, 2]]);
        assert_eq!(shares(&parts, 1), vec![vec![0, 1, 2, 3]]);
        // More workers than micro-batches: some compute none.
        assert_eq!(shares(&parts[..1], 2), vec![vec![0], vec![]]);
    }
}
