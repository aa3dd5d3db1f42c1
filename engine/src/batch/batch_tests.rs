use super::column::{ADVANTAGES, GROUP_ID, RESPONSE_MASK, SCORE};
use super::*;

fn three_samples() -> Batch {
    Batch::from_sequences([vec![1, 2, 3], vec![4], vec![5, 6]])
        .with(&RESPONSE_MASK, vec![false, true, true, true, false, true])
        .unwrap()
        .with(&SCORE, vec![1.0f32, 0.0, 0.5])
        .unwrap()
        .with(&GROUP_ID, vec![7u64, 7, 8])
        .unwrap()
}

#[test]
fn packs_without_padding() {
    let b = three_samples();
    assert_eq!(b.num_samples(), 3);
    assert_eq!(b.num_tokens(), 6);
    assert_eq!(b.offsets(), &[0, 3, 4, 6]);
    assert_eq!(b.sample_tokens(2), &[5, 6]);
    assert_eq!(b.lengths().collect::<Vec<_>>(), vec![3, 1, 2]);
}

#[test]
fn set_checks_length_and_get_checks_type() {
    let mut b = three_samples();
    let err = b.set(&ADVANTAGES, vec![0.0f32; 5]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "column `advantages` has 5 values but the batch has 6 Tokens"
    );
    let err = b.f32s(&GROUP_ID).unwrap_err();
    assert_eq!(
        err.to_string(),
        "column `group_id` holds u64 values, not f32"
    );
    let err = b.f32s(&ADVANTAGES).unwrap_err();
    assert_eq!(
        err.to_string(),
        "batch has no Token-level column `advantages`"
    );
}

#[test]
fn select_and_split_keep_columns_aligned() {
    let b = three_samples();
    let s = b.select(&[2, 0]);
    assert_eq!(s.tokens(), &[5, 6, 1, 2, 3]);
    assert_eq!(s.offsets(), &[0, 2, 5]);
    assert_eq!(
        s.bools(&RESPONSE_MASK).unwrap(),
        &[false, true, false, true, true]
    );
    assert_eq!(s.f32s(&SCORE).unwrap(), &[0.5, 1.0]);

    let parts = b.split(2);
    assert_eq!(
        parts.iter().map(Batch::num_samples).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(Batch::concat(&parts).unwrap(), b);
}

#[test]
fn concat_rejects_different_columns_and_skips_bare_empties() {
    let b = three_samples();
    let joined = Batch::concat(&[Batch::new(), b.clone(), Batch::new()]).unwrap();
    assert_eq!(joined, b);
    let other = Batch::from_sequences([vec![9]]);
    assert!(Batch::concat(&[b, other]).is_err());
}

#[test]
fn merge_unions_columns_of_the_same_samples() {
    let b = three_samples();
    let mut left = b.clone();
    left.set(&ADVANTAGES, vec![0.5f32; 6]).unwrap();
    let merged = left.clone().merge(b.clone()).unwrap();
    assert!(merged.has(&ADVANTAGES) && merged.has(&SCORE));

    let mut conflicting = b.clone();
    conflicting.set(&ADVANTAGES, vec![0.25f32; 6]).unwrap();
    assert!(left.merge(conflicting).is_err());
    assert!(b.merge(Batch::from_sequences([vec![1]])).is_err());
}

#[test]
fn round_trips_through_json() {
    let b = three_samples();
    let text = serde_json::to_string(&b).unwrap();
    let back: Batch = serde_json::from_str(&text).unwrap();
    assert_eq!(back, b);
}

#[test]
fn a_batch_read_back_is_checked_whole() {
    let read = |text: &str| serde_json::from_str::<Batch>(text).map_err(|e| e.to_string());
    let ok = r#"{"tokens": [1, 2, 3], "offsets": [0, 1, 3],
        "token_columns": {"advantages": {"F32": [0.5, 1.0, 2.0]}},
        "sample_columns": {"score": {"F32": [1.0, 0.0]}}}"#;
    let batch = read(ok).unwrap();
    assert_eq!(batch.sample_tokens(1), &[2, 3]);
    for (text, needed) in [
        (r#"{"tokens": [1], "offsets": []}"#, "must start with 0"),
        (r#"{"tokens": [1], "offsets": [1, 1]}"#, "must start with 0"),
        (
            r#"{"tokens": [1, 2], "offsets": [0, 2, 1, 2]}"#,
            "entry 2 is 1 after 2",
        ),
        (
            r#"{"tokens": [1, 2], "offsets": [0, 5]}"#,
            "ends at 5, but there are 2 tokens",
        ),
        (
            r#"{"tokens": [1, 2], "offsets": [0, 2], "token_columns": {"advantages": {"F32": [1.0]}}}"#,
            "column `advantages` has 1 values but the batch has 2 Tokens",
        ),
        (
            r#"{"tokens": [1, 2], "offsets": [0, 2], "sample_columns": {"score": {"F32": []}}}"#,
            "column `score` has 0 values but the batch has 1 Samples",
        ),
        (
            r#"{"tokens": [], "offsets": [0], "extra": 1}"#,
            "unknown field `extra`",
        ),
    ] {
        let err = read(text).unwrap_err();
        assert!(err.contains(needed), "{text}: {err}");
    }
}
