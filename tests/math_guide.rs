//! The numeric answer guide through the binary: `Math` with integer answers (`operators:
//! "+-"`) names its answers, so `guide: Actions` samples only `<answer>N</answer>` with N
//! in the env's range; the tokens the guide forces have log-prob 0; and the log-probs
//! training takes over the allowed set equal the sampling ones.

mod common;

use common::{assert_ok, metrics, run};
use roll_flow::model::tokenizer::TextTokenizer;
use roll_flow_engine::batch::column::{BEHAVIOUR_LOGPROB, RESPONSE_MASK, TOKEN_TURN};
use roll_flow_engine::Column;

#[test]
fn guided_answers_are_in_range_forced_tokens_certain_and_scoring_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let (out, dumps) = (dir.path().join("run"), dir.path().join("dumps"));
    let dump_arg = dumps.display().to_string();
    // The shipped file takes the rollout's log-probs as π_old; a LogProb node put back
    // scores the same samples as training does, to compare.
    let shipped = std::fs::read_to_string("pipelines/math_multi_turn.ron").unwrap();
    let scored = shipped
        .replace(
            "\"adv\":",
            "\"old_logprob\": LogProb(model: \"policy\"),\n        \"adv\":",
        )
        .replace(
            "(\"rollout\", \"adv\"),",
            "(\"rollout\", \"old_logprob\"), (\"old_logprob\", \"adv\"),",
        );
    assert!(scored.contains("LogProb") && scored.contains("(\"old_logprob\", \"adv\")"));
    let file = dir.path().join("math_multi_turn.ron");
    std::fs::write(&file, scored).unwrap();
    assert_ok(&run(
        file.to_str().unwrap(),
        &out,
        &["--dump-batches", &dump_arg],
    ));
    for record in metrics(&out) {
        let get = |k: &str| {
            record[k]
                .as_f64()
                .unwrap_or_else(|| panic!("{k}: {record:?}"))
        };
        assert!(get("old_logprob/behaviour_gap_max") < 1e-4, "{record:?}");
        assert_eq!(get("rollout/format_error_rate"), 0.0);
        assert!((0.0..=1.0).contains(&get("rollout/info/first_attempt_correct")));
    }
    let tokenizer = TextTokenizer::builtin();
    for step in ["step_000000", "step_000001"] {
        let path = dumps.join(step).join("actor_step.json");
        let batch = roll_flow_engine::batch_dump::read(&path).unwrap();
        let (mask, turn, logprob) = (
            batch.bools(&RESPONSE_MASK).unwrap(),
            batch.i64s(&TOKEN_TURN).unwrap(),
            batch.f32s(&BEHAVIOUR_LOGPROB).unwrap(),
        );
        let tokens = batch.tokens();
        let mut replies = 0;
        for sample in 0..batch.num_samples() {
            let range = batch.sample_range(sample);
            let response: Vec<usize> = range.filter(|&t| mask[t]).collect();
            let turns: std::collections::BTreeSet<i64> =
                response.iter().map(|&t| turn[t]).collect();
            for k in turns {
                let at: Vec<usize> = response.iter().copied().filter(|&t| turn[t] == k).collect();
                let ids: Vec<u32> = at.iter().map(|&t| tokens[t]).collect();
                let text = tokenizer.decode(&ids, false).unwrap();
                let text = text.trim_end_matches("<|im_end|>");
                let number = text
                    .strip_prefix("<answer>")
                    .and_then(|t| t.strip_suffix("</answer>"))
                    .unwrap_or_else(|| panic!("reply {text:?}"));
                let n: i64 = number.parse().unwrap();
                assert!((-8..=18).contains(&n), "{n} is outside the answer range");
                // `<answer>` opens every choice and `</answer>` then the end of the message
                // close it: the guide forces them (log-prob 0); only the number's tokens,
                // at most two, are drawn.
                let lp: Vec<f32> = at.iter().map(|&t| logprob[t]).collect();
                assert_eq!(lp[0], 0.0, "{text}: {lp:?}");
                assert_eq!(lp[lp.len() - 1], 0.0, "{text}: {lp:?}");
                assert!(
                    lp.iter().filter(|&&x| x != 0.0).count() <= 2,
                    "{text}: {lp:?}"
                );
                assert!(lp.iter().all(|&x| x <= 0.0), "{lp:?}");
                replies += 1;
            }
        }
        assert!(
            replies >= batch.num_samples(),
            "every episode replied at least once"
        );
    }
}

/// The tokens' log-probs the first update took (`policy_logprob`, the step's starting
/// weights) and the rollout's (`behaviour_logprob`), over every response token of step 0,
/// with `ActorStep` set as `sets` say; and the step's number of samples.
fn first_update_logprobs(sets: &[&str]) -> (Vec<f32>, Vec<f32>, usize) {
    let dir = tempfile::tempdir().unwrap();
    let (out, dumps) = (dir.path().join("run"), dir.path().join("dumps"));
    let mut args = vec!["--dump-batches", dumps.to_str().unwrap(), "--steps", "1"];
    for set in sets {
        args.extend(["--set", set]);
    }
    assert_ok(&run("pipelines/math_multi_turn.ron", &out, &args));
    let path = dumps.join("step_000000").join("actor_step.loss.json");
    let loss = roll_flow_engine::batch_dump::read(&path).unwrap();
    let mask = loss.bools(&RESPONSE_MASK).unwrap();
    let policy = loss.f32s(&Column::token("policy_logprob")).unwrap();
    let behaviour = loss.f32s(&BEHAVIOUR_LOGPROB).unwrap();
    let at: Vec<usize> = (0..mask.len()).filter(|&t| mask[t]).collect();
    (
        at.iter().map(|&t| policy[t]).collect(),
        at.iter().map(|&t| behaviour[t]).collect(),
        loss.num_samples(),
    )
}

#[test]
fn a_free_target_scores_guided_replies_without_the_guide() {
    // Guided (the default): the update scores as the rollout sampled, so at the step's
    // starting weights its log-probs are the behaviour ones, forced tokens 0 included.
    let (policy, behaviour, samples) = first_update_logprobs(&[]);
    assert!(!policy.is_empty());
    for (p, b) in policy.iter().zip(&behaviour) {
        assert!((p - b).abs() < 1e-4, "guided: {p} against {b}");
    }
    // Free: the same samples (same seed, same weights), scored over the whole vocabulary.
    // A token's free probability is at most its probability renormalised over the allowed
    // ones, and a forced token (behaviour log-prob 0) is far from certain for a model
    // trained from scratch, so the ratio π_free / π_guide of every token is at most 1 and
    // of a forced one below it.
    let (free, same, _) = first_update_logprobs(&["nodes.actor_step.target=Free"]);
    assert_eq!(same, behaviour, "the same rollout");
    let mut forced = 0;
    for (p, b) in free.iter().zip(&behaviour) {
        assert!(*p <= b + 1e-4, "free: {p} above the guided {b}");
        if *b == 0.0 {
            assert!(*p < -1e-2, "a forced token scored free: {p}");
            forced += 1;
        }
    }
    assert!(
        forced >= 2 * samples,
        "two forced tokens a reply, a reply a sample at least: {forced} in {samples} samples"
    );
}
