//! "Did you mean …?" suggestions from a list of known names.

/// The known name closest to `found`, if it is close enough to be a likely typo.
///
/// Case is ignored for the comparison (`gigpo` suggests `GiGPO`), and the threshold grows
/// with the name's length, the way rustc's own suggestions behave.
pub fn closest<'a, I>(found: &str, known: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let lower = found.to_lowercase();
    let limit = (found.chars().count().max(3) / 3).max(1);
    known
        .into_iter()
        .map(|k| (strsim::osa_distance(&lower, &k.to_lowercase()), k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// `help` text for an unknown name: a suggestion, or the list of valid names.
pub fn did_you_mean(found: &str, known: &[&str]) -> String {
    match closest(found, known.iter().copied()) {
        Some(k) => format!("did you mean `{k}`?"),
        None if known.is_empty() => "nothing is declared under that name".to_string(),
        None => format!("expected one of {}", quoted_list(known)),
    }
}

/// `a`, `b` and `c`.
pub fn quoted_list(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.len() {
        0 => String::new(),
        1 => quoted[0].clone(),
        n => format!("{} or {}", quoted[..n - 1].join(", "), quoted[n - 1]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_typos_ignoring_case() {
        let known = ["StarPO", "GiGPO", "Gae"];
        assert_eq!(closest("GiGPOO", known), Some("GiGPO"));
        assert_eq!(closest("gigpo", known), Some("GiGPO"));
        assert_eq!(closest("Starpo", known), Some("StarPO"));
        assert_eq!(closest("Reinforce", known), None);
    }

    #[test]
    fn lists_names_when_nothing_is_close() {
        assert_eq!(
            did_you_mean("zzz", &["a", "b"]),
            "expected one of `a` or `b`"
        );
        assert_eq!(
            did_you_mean("grups", &["groups", "group_size"]),
            "did you mean `groups`?"
        );
    }
}
