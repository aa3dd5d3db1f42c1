//! Pipeline files with non-ASCII text: errors point at the right character, and nothing
//! in loading (decoding, `--set` overrides, parsing, locating) panics on any of it.

mod common;

use common::{load_text, TestCatalog, VALID};
use roll_flow_engine::spec::locate::{first_identifier, value_head};
use roll_flow_engine::spec::{load, parse, Diagnostic};
use std::path::Path;

fn first_error(text: &str) -> Diagnostic {
    load_text(text).expect_err("should fail").remove(0)
}

/// (line, col, width) of a diagnostic's location.
fn place(d: &Diagnostic) -> (usize, usize, usize) {
    let at = d.location.as_ref().expect("a location");
    (at.start.line, at.start.col, at.width)
}

#[test]
fn multibyte_trailing_text_is_pointed_at_by_character() {
    for extra in ["…", "“", "漢字", "é"] {
        let d = first_error(&format!("{VALID}\n{extra}"));
        assert_eq!(d.message, "unexpected text after the end of the pipeline");
        // Line 13, first character, one character wide however many bytes it takes.
        assert_eq!(place(&d), (13, 1, 1), "{extra}: {d}");
        let d = first_error(&format!("{VALID} {extra}"));
        assert_eq!(place(&d), (12, 3, 1), "{extra}: {d}");
        assert!(
            d.to_string()
                .contains(&format!("12 | ) {extra}\n   |   ^\n")),
            "{d}"
        );
    }
}

#[test]
fn missing_comma_points_right_after_the_value_not_at_a_comment() {
    // `steps: 2` ends at column 27 of line 2; the comment after it must not move the caret.
    for comment in ["// β", "// note", "/* β */", "// “quoted” …"] {
        let text = VALID.replace("steps: 2, ", &format!("steps: 2 {comment}\n    "));
        let d = first_error(&text);
        assert_eq!(d.message, "expected `,` after this value", "{comment}: {d}");
        assert_eq!(place(&d), (2, 27, 1), "{comment}: {d}");
        let caret = " ".repeat(26) + "^";
        assert!(d.to_string().contains(&format!(" | {caret}\n")), "{d}");
    }
    // Columns count characters: the closing quote of `"vålid…"` is column 18.
    let text = VALID.replace(r#""valid", "#, "\"vålid…\" // β\n    ");
    let d = first_error(&text);
    assert_eq!(d.message, "expected `,` after this value");
    assert_eq!(place(&d), (2, 18, 1), "{d}");
}

fn load_file(name: &str, bytes: &[u8], overrides: &[&str]) -> Result<u64, Vec<Diagnostic>> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    load::<TestCatalog>(&path, &overrides).map(|l| l.pipeline.steps)
}

#[test]
fn a_byte_order_mark_is_skipped_with_and_without_overrides() {
    let with_bom = [b"\xEF\xBB\xBF".as_slice(), VALID.as_bytes()].concat();
    assert_eq!(load_file("bom.ron", &with_bom, &[]).unwrap(), 2);
    assert_eq!(load_file("bom.ron", &with_bom, &["steps=5"]).unwrap(), 5);
    assert_eq!(
        load_file("bom.ron", &with_bom, &["steps=5", "out_dir=\"o\""]).unwrap(),
        5
    );
    // Columns count from after the mark, as an editor shows them.
    let bad = [b"\xEF\xBB\xBF".as_slice(), b"Pipline()"].concat();
    let d = load_file("bom.ron", &bad, &[]).unwrap_err().remove(0);
    assert_eq!(d.message, "expected `Pipeline(...)`, found `Pipline(...)`");
    assert_eq!(place(&d), (1, 1, 7), "{d}");
}

#[test]
fn the_override_locator_takes_non_ascii_text_whole() {
    let text = format!("// “pipeline” ✓ /* … */\n{VALID}");
    let steps = value_head(&text, &[roll_flow_engine::spec::locate::field("steps")]).unwrap();
    assert_eq!(&text[steps.start..steps.end], "2");
    assert_eq!(first_identifier(&text), Some("Pipeline"));
    assert_eq!(
        first_identifier(&format!("\u{feff}{text}")),
        Some("Pipeline")
    );
    assert_eq!(first_identifier("… Pipeline()"), Some("Pipeline"));
}

/// Every string spliced in at every character boundary of a valid file: loading gives a
/// pipeline or diagnostics (which render), never a panic.
#[test]
fn no_unicode_splice_panics() {
    let pieces = [
        "…",
        "“",
        "漢",
        "β",
        "\u{feff}",
        "é\u{301}",
        "🦀",
        "\u{0}",
        "\u{2028}",
    ];
    let boundaries: Vec<usize> = VALID.char_indices().map(|(i, _)| i).collect();
    for piece in pieces {
        for &at in &boundaries {
            let text = format!("{}{piece}{}", &VALID[..at], &VALID[at..]);
            if let Err(d) = parse::<TestCatalog>(Path::new("t.ron"), &text) {
                let _ = d.to_string();
            }
            let _ = first_identifier(&text);
            let _ = value_head(&text, &[roll_flow_engine::spec::locate::field("steps")]);
        }
        // Through a file with an override, at a handful of places.
        for &at in boundaries.iter().step_by(37) {
            let text = format!("{}{piece}{}", &VALID[..at], &VALID[at..]);
            if let Err(ds) = load_file("splice.ron", text.as_bytes(), &["steps=3"]) {
                ds.iter().for_each(|d| drop(d.to_string()));
            }
        }
    }
}
