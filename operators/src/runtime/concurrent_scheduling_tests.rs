//! Scheduling of [`super::in_order`] and [`super::each_in_order`]: each concurrent item
//! keeps to its own lane, results reach the sink in item order as they come (not all at the
//! end), the first error in item order stops the sink, and a lone item runs on a lane of
//! every thread.

use super::{each_in_order, in_order};

/// A thread working for one concurrent item never takes up another item: each item's
/// split work stays in its own lane. Were items to share rayon's threads, a thread waiting
/// inside an item for its split work (as burn's backward waits while it holds the graph's
/// lock) could start another item nested in the first; when that item's backward then
/// visits every graph's lock, it waits for its own thread, for ever. Each item here splits
/// sleeping work, so threads wait in it; the nesting depth seen by any thread must stay 1.
#[test]
fn a_thread_waiting_inside_a_concurrent_item_never_takes_up_another() {
    use rayon::prelude::*;
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering};
    thread_local!(static DEPTH: Cell<usize> = const { Cell::new(0) });
    let deepest = AtomicUsize::new(0);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    let items: Vec<usize> = (0..16).collect();
    let out = pool.install(|| {
        in_order(items, true, |i| {
            let depth = DEPTH.with(|d| {
                d.set(d.get() + 1);
                d.get()
            });
            deepest.fetch_max(depth, Ordering::SeqCst);
            (0..8).into_par_iter().for_each(|_| {
                std::thread::sleep(std::time::Duration::from_millis(2));
            });
            DEPTH.with(|d| d.set(d.get() - 1));
            Ok(i * 10)
        })
    });
    assert_eq!(out.unwrap(), (0..16).map(|i| i * 10).collect::<Vec<_>>());
    assert_eq!(
        deepest.load(Ordering::SeqCst),
        1,
        "an item ran nested in another"
    );
}

/// Results reach the sink while later items still run: item k (k ≥ 2) is computed only once
/// the sink has taken item k − 2, which a runner that kept every result to the end never
/// allows (it fails here after waiting 10 s). So a step of many micro-batches holds a few
/// parts' gradients, not all of them (a 32-part SmolLM2 step held 32 × 540 MB).
#[test]
fn results_reach_the_sink_before_later_items_are_computed() {
    use std::sync::{Condvar, Mutex};
    let taken = (Mutex::new(0usize), Condvar::new());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let mut order = Vec::new();
    let outcome = pool.install(|| {
        let wait_for = |k: usize| {
            let (count, changed) = &taken;
            let guard = count.lock().unwrap();
            let timeout = std::time::Duration::from_secs(10);
            let (guard, _) = (changed.wait_timeout_while(guard, timeout, |n| *n + 2 <= k)).unwrap();
            match *guard + 2 > k {
                true => Ok(k),
                false => Err(format!("item {k} ran before the sink took item {}", k - 2)),
            }
        };
        each_in_order((0..12).collect(), true, wait_for, |k| {
            order.push(k);
            *taken.0.lock().unwrap() += 1;
            taken.1.notify_all();
        })
    });
    outcome.unwrap();
    assert_eq!(order, (0..12).collect::<Vec<_>>());
}

/// The first error in item order is returned and no result after it reaches the sink, even
/// when a later item fails first (item 5 fails at once, item 3 after a wait).
#[test]
fn the_first_error_in_item_order_stops_the_sink() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    for concurrent in [false, true] {
        let mut seen = Vec::new();
        let outcome = pool.install(|| {
            let f = |i: usize| match i {
                3 => {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    Err("item 3".to_string())
                }
                5 => Err("item 5".to_string()),
                _ => Ok(i),
            };
            each_in_order((0..8).collect(), concurrent, f, |i| seen.push(i))
        });
        assert_eq!(
            outcome,
            Err("item 3".to_string()),
            "concurrent {concurrent}"
        );
        assert_eq!(seen, vec![0, 1, 2], "concurrent {concurrent}");
    }
}

/// One concurrent item runs on a lane's pool of every thread, not on the calling thread;
/// without `concurrent` it stays on the caller.
#[test]
fn a_single_concurrent_item_runs_in_a_lane_of_every_thread() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    let seen = |concurrent| {
        pool.install(|| {
            in_order(vec![()], concurrent, |()| {
                let name = std::thread::current().name().map(str::to_owned);
                Ok((name, rayon::current_num_threads()))
            })
        })
        .unwrap()
        .remove(0)
    };
    let (lane, threads) = seen(true);
    assert!(lane.is_some_and(|n| n.starts_with("roll-flow:lane-0.")));
    assert_eq!(threads, 3);
    let (caller, _) = seen(false);
    assert!(!caller.is_some_and(|n| n.starts_with("roll-flow:lane")));
}
