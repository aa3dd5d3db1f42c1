use super::*;

const SRC: &str = r#"#![enable(implicit_some)]
// A comment with "quotes" and (parens).
Pipeline(
    name: "demo",
    steps: 3, /* block /* nested */ comment */
    models: { "policy": (arch: Tiny(layers: 2), optim: AdamW(lr: 1e-3)) },
    nodes: {
        "rollout": Rollout(envs: "train", samples: Step(history: 2)),
        "adv": GiGPO(step_gamma: 0.95),
        "adv": Gae(),
    },
    edges: [("rollout", "adv"), ("adv", "missing")],
)
"#;

fn text(span: ByteSpan) -> &'static str {
    &SRC[span.start..span.end]
}

#[test]
fn finds_fields_keys_and_indices() {
    let at = |p: &[Seg]| value_head(SRC, p).map(text);
    assert_eq!(at(&[field("steps")]), Some("3"));
    assert_eq!(at(&[field("nodes"), key("adv")]), Some("GiGPO"));
    assert_eq!(
        at(&[field("nodes"), Seg::Key("adv".into(), 1)]),
        Some("Gae")
    );
    assert_eq!(
        at(&[field("edges"), Seg::Index(1), Seg::Index(1)]),
        Some("\"missing\"")
    );
    assert_eq!(
        at(&[field("models"), key("policy"), field("optim"), field("lr")]),
        Some("1e-3")
    );
    assert_eq!(
        at(&[
            field("nodes"),
            key("rollout"),
            field("samples"),
            field("history")
        ]),
        Some("2")
    );
    assert_eq!(at(&[field("nodes"), key("nope")]), None);
}

#[test]
fn finds_key_and_field_names() {
    assert_eq!(
        name_span(SRC, &[field("nodes"), Seg::Key("adv".into(), 1)]).map(text),
        Some("\"adv\"")
    );
    assert_eq!(name_span(SRC, &[field("steps")]).map(text), Some("steps"));
}

#[test]
fn first_identifier_skips_comments_and_attributes() {
    assert_eq!(first_identifier(SRC), Some("Pipeline"));
    assert_eq!(
        first_identifier("/* x */ FrozenLake(size: 4)"),
        Some("FrozenLake")
    );
    assert_eq!(first_identifier("// only a comment"), None);
}

#[test]
fn gives_up_quietly_on_text_it_cannot_read() {
    assert!(parse("Pipeline(name: ").is_none());
    assert!(parse("\"unterminated").is_none());
    assert!(parse("").is_none());
}

/// Nesting deeper than `ron`'s recursion limit is not RON here either, and parsing it does
/// not overflow the stack (a `--set` value of 20,000 `[` did).
#[test]
fn nesting_past_the_limit_is_refused_without_overflow() {
    let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    assert!(parse(&nested(MAX_DEPTH)).is_some());
    assert!(parse(&nested(MAX_DEPTH + 1)).is_none());
    assert!(parse(&nested(200_000)).is_none());
}
