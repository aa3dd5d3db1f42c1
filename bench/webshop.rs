//! WebShop throughput: catalog + BM25 index build time, and env steps per second with
//! search, for generated catalogs of 10,000 and 1,000,000 products.
//!
//! `cargo bench -p roll-flow-envs --bench webshop` (release profile). Steps are the
//! scripted expert's episodes (search the instruction, page to the target, open it, choose
//! its options, buy: about five steps, one of them a search), each step the full text
//! path (`<answer>` parse, page change, the next observation with its admissible actions).
//! Rates are the median of 5 rounds of about 0.4 s, on one thread and on two threads
//! (each its own env, sharing the catalog): first with a new instruction every episode (every
//! search runs), then in groups of 4 episodes sharing an instruction, as the WebShop
//! pipelines' `group_size: 4` plays them (a group's repeated searches are answered from the
//! index's cache). "Searches/s" times the uncached search alone. `WEBSHOP_BENCH_SIZES=10000`
//! runs only the given sizes (comma-separated). Prints a markdown table; the latest is in
//! bench/README.md.

use std::hint::black_box;
use std::time::{Duration, Instant};

use roll_flow_envs::webshop::catalog::Catalog;
use roll_flow_envs::webshop::scripted::{expert_action, play_episode};
use roll_flow_envs::webshop::search::SEARCH_RETURN_N;
use roll_flow_envs::webshop::{CatalogSource, WebShop, WebShopConfig};
use roll_flow_envs::Env;

const ROUND: Duration = Duration::from_millis(400);
const ROUNDS: usize = 5;

fn config(products: usize) -> WebShopConfig {
    WebShopConfig {
        catalog: CatalogSource::Generated { products, seed: 0 },
        ..WebShopConfig::default()
    }
}

/// Episodes of a group in the grouped runs (the WebShop pipelines' `group_size`).
const GROUP: u64 = 4;

/// Median steps per second of expert episodes on `env`, from instruction `first` on, each
/// instruction played by `group` episodes in a row.
fn steps_per_second(env: &mut WebShop, first: u64, group: u64) -> (f64, f64, f64) {
    let (mut seed, mut played_in_group) = (first, 0);
    let mut rates = Vec::new();
    let mut searches = Vec::new();
    let (mut perfect, mut played) = (0usize, 0usize);
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let (mut steps, mut episodes) = (0usize, 0usize);
        while start.elapsed() < ROUND {
            let outcome = play_episode(env, seed, expert_action).expect("an episode");
            steps += black_box(outcome.turns);
            perfect += usize::from(outcome.reward == 1.0);
            played += 1;
            episodes += 1;
            played_in_group += 1;
            if played_in_group == group {
                played_in_group = 0;
                seed += 2; // the other thread plays the odd seeds
            }
        }
        let secs = start.elapsed().as_secs_f64();
        rates.push(steps as f64 / secs);
        searches.push(episodes as f64 / secs);
    }
    rates.sort_by(f64::total_cmp);
    searches.sort_by(f64::total_cmp);
    (
        rates[ROUNDS / 2],
        searches[ROUNDS / 2],
        perfect as f64 / played as f64,
    )
}

/// Searches per second, uncached, of `n` instructions.
fn search_rate(catalog: &Catalog, n: u64) -> f64 {
    let queries: Vec<String> = (0..n).map(|s| catalog.goal(s).instruction).collect();
    let start = Instant::now();
    for q in &queries {
        let hits = catalog.index.search_scored(q, SEARCH_RETURN_N);
        black_box(hits.expect("a search"));
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Steps per second summed over two threads, each its own env on the shared catalog.
fn on_two_threads(products: usize, first: u64, group: u64) -> f64 {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2u64)
            .map(|t| {
                scope.spawn(move || {
                    let mut env = config(products).build().expect("the shared catalog");
                    steps_per_second(&mut env, first + t, group).0
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a thread"))
            .sum()
    })
}

fn main() {
    let sizes: Vec<usize> = std::env::var("WEBSHOP_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![10_000, 1_000_000]);
    println!("| products | catalog + index build | searches/s (1 thread) | env steps/s, 1 thread | env steps/s, 2 threads | 2 threads, groups of {GROUP} | steps per episode | expert reward 1 |");
    println!("|---|---|---|---|---|---|---|---|");
    for products in sizes {
        let start = Instant::now();
        let mut env = config(products).build().expect("a catalog");
        let build = start.elapsed().as_secs_f64();
        env.reset(0).expect("reset");
        let searches = search_rate(env.catalog(), 2000);
        // Instructions of each run start far apart, so no run meets another's searches.
        let (one, episodes_per_s, perfect) = steps_per_second(&mut env, 0, 1);
        let two = on_two_threads(products, 1_000_000, 1);
        let grouped = on_two_threads(products, 2_000_000, GROUP);
        println!(
            "| {products} | {build:.2} s | {searches:.0} | {one:.0} | {two:.0} | {grouped:.0} | {:.2} | {:.1}% |",
            one / episodes_per_s,
            100.0 * perfect
        );
    }
}
