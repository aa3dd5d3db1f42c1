//! The collective dataflow of one worker (see the module above): the `requests` source,
//! the `reduce` stage at each shard's owner and the `assemble` stage that answers the call.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::TryRecvError;
use serde::{Deserialize, Serialize};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::operator::source;
use timely::dataflow::operators::{Capability, Operator};
use timely::dataflow::{Scope, Stream};

use super::{heartbeat, Collective, Heartbeats, Link, Reply, Request, PEER_STOPPED};

/// What travels between workers.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum Part {
    /// Worker `from`'s values of shard `shard` (sent to the shard's owner).
    Shard {
        from: u32,
        shard: u32,
        values: Vec<f32>,
    },
    /// The sum of shard `shard` over every worker, for worker `to`.
    Summed {
        shard: u32,
        to: u32,
        values: Vec<f32>,
    },
    /// Worker `from`'s bytes, for worker `to`.
    Bytes { from: u32, to: u32, bytes: Vec<u8> },
    /// Worker `from` stopped and will make no further call.
    Stopped { from: u32, to: u32, why: String },
}

impl Part {
    fn route(&self) -> u64 {
        u64::from(match self {
            Part::Shard { shard, .. } => *shard,
            Part::Summed { to, .. } | Part::Bytes { to, .. } | Part::Stopped { to, .. } => *to,
        })
    }
}

/// Builds the collective dataflow in `scope`, heartbeats included
/// ([`super::heartbeat`]); returns this worker's handle and what it hears of the others.
pub(crate) fn build(
    scope: Scope<'_, u64>,
    workers_per_process: usize,
    peer_timeout: Duration,
) -> (Collective, Arc<Heartbeats>) {
    let (index, peers) = (scope.index(), scope.peers());
    let heartbeats = heartbeat::build(scope, workers_per_process, peer_timeout);
    let (requests, incoming) = crossbeam_channel::unbounded::<Request>();
    let (answer, replies) = crossbeam_channel::unbounded();
    let mut wake = None;
    let parts: Stream<'_, u64, Vec<Part>> =
        source::<_, CapacityContainerBuilder<Vec<Part>>, _, _>(scope, "requests", |cap, info| {
            wake = Some(scope.worker().sync_activator_for(info.address.to_vec()));
            let mut cap = Some(cap);
            move |output| {
                while let Some(held) = cap.as_mut() {
                    let request = match incoming.try_recv() {
                        Ok(request) => request,
                        Err(TryRecvError::Empty) => return,
                        Err(TryRecvError::Disconnected) => Request::Stop("it finished".into()),
                    };
                    let mut session = output.session(held);
                    let mut give = |part| session.give(part);
                    let stop = matches!(request, Request::Stop(_));
                    split(request, index, peers, &mut give);
                    drop(session);
                    if stop {
                        cap = None;
                    } else {
                        let next = *held.time() + 1;
                        held.downgrade(&next);
                    }
                }
            }
        });
    let reduced = at_each_time(parts, "reduce", move |_, parts, give| {
        let mut shards: Vec<(u32, Vec<f32>)> = Vec::new();
        for part in parts {
            match part {
                Part::Shard { from, values, .. } => shards.push((from, values)),
                other => give(other),
            }
        }
        if shards.is_empty() {
            return;
        }
        shards.sort_by_key(|(from, _)| *from);
        let mut sum = shards[0].1.clone();
        for (_, values) in &shards[1..] {
            for (s, v) in sum.iter_mut().zip(values) {
                *s += v;
            }
        }
        if shards.len() < peers {
            // A stopped worker's part is missing: its `Stopped` says why, sent on already.
            return;
        }
        for to in 0..peers {
            give(Part::Summed {
                shard: index as u32,
                to: to as u32,
                values: sum.clone(),
            });
        }
    });
    let answer = Mutex::new(answer);
    at_each_time(reduced, "assemble", move |time, parts, _| {
        let reply = assemble(parts, peers);
        let _ = answer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send((time, reply));
    });
    let collective = Collective {
        index,
        peers,
        link: Some(Arc::new(Link {
            requests: Some(requests),
            replies: Mutex::new(replies),
            wake: wake.expect("the source's constructor ran"),
            bytes_sent: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
            heartbeats: heartbeats.clone(),
        })),
    };
    (collective, heartbeats)
}

/// A request's parts: a sum's shards to their owners, a gather's or a stop's copies to
/// every worker.
fn split(request: Request, index: usize, peers: usize, give: &mut dyn FnMut(Part)) {
    let from = index as u32;
    match request {
        Request::Sum(values) => {
            for shard in 0..peers {
                let range = shard_range(values.len(), shard, peers);
                let values = values[range].to_vec();
                give(Part::Shard {
                    from,
                    shard: shard as u32,
                    values,
                });
            }
        }
        Request::Gather(bytes) => {
            for to in 0..peers as u32 {
                let bytes = bytes.clone();
                give(Part::Bytes { from, to, bytes });
            }
        }
        Request::Stop(why) => {
            for to in 0..peers as u32 {
                let why = why.clone();
                give(Part::Stopped { from, to, why });
            }
        }
    }
}

/// The values of shard `shard` of `peers` in a vector of `n`: contiguous, sizes differing
/// by at most one.
fn shard_range(n: usize, shard: usize, peers: usize) -> std::ops::Range<usize> {
    (n * shard / peers)..(n * (shard + 1) / peers)
}

/// One call's reply from what arrived for it: the summed shards in shard order, or the
/// gathered bytes in worker order; a stopped worker's reason when a part is missing.
fn assemble(parts: Vec<Part>, peers: usize) -> Result<Reply, String> {
    let mut summed = BTreeMap::new();
    let mut gathered = BTreeMap::new();
    let mut stopped = Vec::new();
    for part in parts {
        match part {
            Part::Summed { shard, values, .. } => {
                summed.insert(shard, values);
            }
            Part::Bytes { from, bytes, .. } => {
                gathered.insert(from, bytes);
            }
            Part::Stopped { from, why, .. } => {
                stopped.push(format!("worker {from} stopped ({why})"))
            }
            Part::Shard { .. } => {}
        }
    }
    if !stopped.is_empty() && (summed.len() < peers && gathered.len() < peers) {
        return Err(format!("{PEER_STOPPED}{}", stopped.join("; ")));
    }
    if summed.len() == peers {
        return Ok(Reply::Sum(summed.into_values().flatten().collect()));
    }
    if gathered.len() == peers {
        return Ok(Reply::Gather(gathered.into_values().collect()));
    }
    Err(format!(
        "a collective call got {} of {peers} workers' parts",
        summed.len().max(gathered.len())
    ))
}

/// An operator that routes each part to its worker and, once the frontier has passed a
/// time, calls `logic` with everything that arrived for it (and a way to send parts on).
fn at_each_time<'s>(
    parts: Stream<'s, u64, Vec<Part>>,
    name: &str,
    mut logic: impl FnMut(u64, Vec<Part>, &mut dyn FnMut(Part)) + 'static,
) -> Stream<'s, u64, Vec<Part>> {
    let pact = Exchange::new(|part: &Part| part.route());
    parts.unary_frontier(pact, name, move |_cap, _info| {
        let mut stash: BTreeMap<u64, (Capability<u64>, Vec<Part>)> = BTreeMap::new();
        move |(input, frontier), output| {
            input.for_each_stamp(|cap, data| {
                let Some(cap) = cap.retain_least(output.output_index()) else {
                    return;
                };
                let entry = stash
                    .entry(*cap.time())
                    .or_insert_with(|| (cap, Vec::new()));
                entry.1.extend(data.flat_map(std::mem::take));
            });
            while let Some((&time, _)) = stash.first_key_value() {
                if frontier.less_equal(&time) {
                    break;
                }
                let (cap, arrived) = stash.remove(&time).expect("present");
                let mut session = output.session(&cap);
                logic(time, arrived, &mut |part| session.give(part));
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_the_vector_in_order() {
        let ranges: Vec<_> = (0..3).map(|s| shard_range(10, s, 3)).collect();
        assert_eq!(ranges, vec![0..3, 3..6, 6..10]);
        assert_eq!(shard_range(1, 0, 2), 0..0);
        assert_eq!(shard_range(1, 1, 2), 0..1);
    }
}
