//! The env through `reset`/`step`: pages, clicks, invalid actions, the purchase and its
//! reward parts, truncation, determinism; the scripted expert and random policy.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::config::EnvConfig;
use crate::webshop::config::CatalogSource;
use crate::webshop::scripted::{expert_action, play_episode, random_action, rule_action};

fn shop(products: usize) -> WebShop {
    WebShopConfig {
        catalog: CatalogSource::Generated { products, seed: 0 },
        ..WebShopConfig::default()
    }
    .build()
    .unwrap()
}

fn answer(action: &str) -> String {
    format!("<think>shopping</think><answer>{action}</answer>")
}

#[test]
fn parse_action_follows_webshops_pattern() {
    assert_eq!(
        parse_action("search[red shoes]"),
        Some(("search", "red shoes"))
    );
    assert_eq!(parse_action("click[< Prev]"), Some(("click", "< Prev")));
    assert_eq!(parse_action("search[a [b] c]"), Some(("search[a", "b] c")));
    assert_eq!(parse_action("click[x] trailing"), Some(("click", "x")));
    for bad in ["search[]", "[x]", "search", "click[x", "click x]", ""] {
        assert_eq!(parse_action(bad), None, "{bad}");
    }
}

#[test]
fn an_episode_walks_search_results_item_options_and_buys_the_target() {
    let mut env = shop(300);
    let reset = env.reset(5).unwrap();
    let goal = env.goal().unwrap().clone();
    assert!(reset.instruction.contains(&goal.instruction));
    assert!(reset.observation.starts_with(&format!(
        "WebShop [SEP] Instruction: [SEP] {} [SEP] Search",
        goal.instruction
    )));
    assert!(reset
        .observation
        .ends_with("\nAvailable actions: search[<your query>]"));
    assert_eq!(env.valid_actions(), vec!["search[<your query>]"]);

    let step = env
        .step(&answer(&format!("search[{}]", goal.instruction)))
        .unwrap();
    assert!(step.info.action_is_valid && step.info.action_is_effective);
    assert_eq!((step.reward, step.done()), (0.0, false));
    let total = env.session().results.len();
    assert!(step
        .observation
        .contains(&format!("Page 1 (Total results: {total}) [SEP] Next >")));
    assert!(!step.observation.contains("< Prev"));
    let target = env.catalog().products.get(goal.target).into_owned();
    // The target is on one of the result pages; page there.
    let position = env
        .session()
        .results
        .iter()
        .position(|&r| r == goal.target)
        .expect("target found");
    for _ in 0..position / 10 {
        env.step(&answer("click[Next >]")).unwrap();
    }
    assert!(env.observation().contains(&target.asin));
    let opened = env
        .step(&answer(&format!("click[{}]", target.asin)))
        .unwrap();
    assert!(opened.observation.contains(&format!("{} [SEP] Price: {} [SEP] Rating: N.A. [SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now", target.title, target.price_tag)));
    // Sub-pages and back.
    let described = env.step(&answer("click[description]")).unwrap();
    assert!(described
        .observation
        .contains(&format!("< Prev [SEP] {}", target.description)));
    env.step(&answer("click[< prev]")).unwrap();
    assert_eq!(env.session().page, Page::Item);
    for value in &goal.options {
        let chose = env.step(&answer(&format!("click[{value}]"))).unwrap();
        assert!(chose.info.action_is_effective, "{value}");
    }
    let bought = env.step(&answer("click[Buy Now]")).unwrap();
    assert!(bought.terminated && bought.info.success);
    assert_eq!(bought.reward, 1.0);
    assert_eq!(bought.info.metrics.get("r_type"), Some(1.0));
    assert_eq!(bought.info.metrics.get("r_price"), Some(1.0));
    assert_eq!(bought.info.metrics.get("r_att"), Some(1.0));
    assert!(bought
        .observation
        .starts_with("Thank you for shopping with us!"));
    assert!(bought
        .observation
        .ends_with("Your score (min 0.0, max 1.0) [SEP] 1"));
    assert_eq!(
        env.step(&answer("click[back to search]")),
        Err(EnvError::EpisodeOver("WebShop"))
    );
}

#[test]
fn invalid_actions_change_nothing_and_earn_the_format_penalty() {
    let mut env = WebShopConfig {
        format_penalty: -0.1,
        ..WebShopConfig::default()
    }
    .build()
    .unwrap();
    assert_eq!(env.step("x").unwrap_err(), EnvError::NotReset("WebShop"));
    env.reset(1).unwrap();
    let start = env.observation();
    for reply in [
        "no tags",
        "<answer>buy</answer>",
        "<answer>click[buy now]</answer>",
        "<answer>search[]</answer>",
        "<answer>click[search]</answer>",
        "<answer>search[   ]</answer>",
        "<answer>jump[x]</answer>",
    ] {
        let step = env.step(reply).unwrap();
        assert!(
            !step.info.action_is_valid && !step.info.action_is_effective,
            "{reply}"
        );
        assert_eq!(
            (step.reward, step.info.format_penalty),
            (-0.1, -0.1),
            "{reply}"
        );
        assert_eq!(step.observation, start, "{reply}");
    }
    // Searching works from any page (WebShop's text env); clicking needs the page's button.
    env.step(&answer("search[shampoo]")).unwrap();
    assert!(
        !env.step(&answer("click[buy now]"))
            .unwrap()
            .info
            .action_is_valid
    );
    let again = env.step(&answer("SEARCH[Tea]")).unwrap();
    assert!(again.info.action_is_valid);
    assert_eq!(env.session().keywords, "tea");
}

#[test]
fn prev_and_back_move_as_webshop_does() {
    let mut env = shop(300);
    env.reset(2).unwrap();
    env.step(&answer("search[shirt shoe tea chair]")).unwrap();
    env.step(&answer("click[next >]")).unwrap();
    assert_eq!(env.session().results_page, 2);
    assert!(env
        .observation()
        .contains("Page 2 (Total results: 50) [SEP] < Prev [SEP] Next >"));
    let row = env.session().shown_results()[0];
    let asin = env.catalog().products.get(row).asin.clone();
    env.step(&answer(&format!("click[{asin}]"))).unwrap();
    let value = env.catalog().products.get(row).options[0].1[0].clone();
    env.step(&answer(&format!("click[{value}]"))).unwrap();
    assert_eq!(env.session().options.len(), 1);
    // < Prev from an item returns to its results page and clears the options.
    env.step(&answer("click[< prev]")).unwrap();
    assert_eq!(
        (env.session().page, env.session().results_page),
        (Page::Results, 2)
    );
    assert!(env.session().options.is_empty());
    env.step(&answer("click[< prev]")).unwrap();
    assert_eq!(env.session().results_page, 1);
    env.step(&answer("click[back to search]")).unwrap();
    assert_eq!(env.session(), &Session::start(false));
}

#[test]
fn episodes_truncate_at_max_turns_and_seeds_repeat() {
    let mut env = WebShopConfig {
        max_turns: 3,
        ..WebShopConfig::default()
    }
    .build()
    .unwrap();
    env.reset(9).unwrap();
    let first = env.observation();
    let mut last = None;
    for _ in 0..3 {
        last = Some(env.step(&answer("click[nothing]")).unwrap());
    }
    let last = last.unwrap();
    assert!(last.truncated && !last.terminated);
    assert!(env.step(&answer("click[nothing]")).is_err());
    env.reset(9).unwrap();
    assert_eq!(env.observation(), first);
    env.reset(10).unwrap();
    assert_ne!(env.observation(), first);
}

#[test]
fn webshop_is_a_registered_env_with_every_field_defaulted() {
    let config = EnvConfig::parse("WebShop()").unwrap();
    assert_eq!(config, EnvConfig::WebShop(WebShopConfig::default()));
    let mut env = config.build().unwrap();
    assert!(env.reset(0).unwrap().observation.contains("Instruction:"));
    let parsed =
        EnvConfig::parse("WebShop(catalog: Generated(products: 50, seed: 2), max_turns: 20)")
            .unwrap();
    assert!(parsed.validate().is_ok());
    for (bad, field) in [
        ("WebShop(catalog: Generated(products: 0))", "catalog"),
        ("WebShop(max_turns: 0)", "max_turns"),
        (
            "WebShop(catalog: Files(products: \"/nonexistent.json\", attributes: \"/x.json\"))",
            "catalog",
        ),
    ] {
        let err = EnvConfig::parse(bad).unwrap().validate().unwrap_err();
        assert!(
            matches!(err, EnvError::InvalidConfig { field: f, .. } if f == field),
            "{bad}: {err}"
        );
    }
    assert!(EnvConfig::parse("WebShop(products: 5)").is_err());
}

#[test]
fn envs_of_one_source_share_one_catalog() {
    let (a, b) = (shop(123), shop(123));
    assert!(std::sync::Arc::ptr_eq(a.catalog(), b.catalog()));
    assert!(!std::sync::Arc::ptr_eq(a.catalog(), shop(124).catalog()));
}

/// The Done-when figure: the expert buys a perfect product for ≥ 95% of 1,000 generated
/// instructions on the default catalog; the random policy's mean is printed beside it.
#[test]
fn the_scripted_expert_reaches_reward_one_on_95_percent_of_1000_instructions() {
    let mut env = WebShopConfig::default().build().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let (mut perfect, mut expert_sum, mut random_sum, mut rule_sum, mut rule_perfect) =
        (0, 0.0, 0.0, 0.0, 0);
    for seed in 0..1000 {
        let expert = play_episode(&mut env, seed, expert_action).unwrap();
        perfect += usize::from(expert.reward == 1.0);
        expert_sum += expert.reward as f64;
        let random = play_episode(&mut env, seed, |e| random_action(e, &mut rng)).unwrap();
        random_sum += random.reward as f64;
        let rule = play_episode(&mut env, seed, rule_action).unwrap();
        rule_sum += rule.reward as f64;
        rule_perfect += usize::from(rule.reward == 1.0);
    }
    println!(
        "WebShop() 1000 instructions: expert reward 1.0 on {perfect}, mean {:.3}; random mean {:.3}; \
         rule (first result) mean {:.3}, reward 1.0 on {rule_perfect}",
        expert_sum / 1000.0,
        random_sum / 1000.0,
        rule_sum / 1000.0
    );
    assert!(perfect >= 950, "expert perfect on {perfect} of 1000");
    assert!(random_sum < expert_sum);
}

#[test]
fn play_scripted_shops_to_a_perfect_purchase_with_the_parts_in_info() {
    use crate::play::{play_scripted, PlayOptions};
    // The expert's actions for seed 4, as a user would type them (no answer tags).
    let config = EnvConfig::parse("WebShop()").unwrap();
    let mut env = WebShopConfig::default().build().unwrap();
    env.reset(4).unwrap();
    let mut lines = Vec::new();
    loop {
        let action = expert_action(&env);
        lines.push(action.clone());
        if env.step(&answer(&action)).unwrap().done() {
            break;
        }
    }
    let options = PlayOptions {
        seed: 4,
        ..PlayOptions::default()
    };
    let mut out = Vec::new();
    let summary = play_scripted(&config, &options, lines.join("\n").as_bytes(), &mut out).unwrap();
    assert!(summary.success && summary.done);
    let text = String::from_utf8(out).unwrap();
    let json: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let goal = env.goal().unwrap().instruction.clone();
    assert!(json[0]["instruction"].as_str().unwrap().contains(&goal));
    let last = json.last().unwrap();
    assert_eq!(last["reward"], 1.0);
    assert_eq!(last["info"]["metrics"]["r_type"], 1.0);
    assert_eq!(last["info"]["metrics"]["r_price"], 1.0);
    assert!(
        json[1]["info"].get("metrics").is_none(),
        "no parts before buying"
    );
}
