//! Range checks for estimator settings, so a typo in a pipeline (`gamma: 9.5`, a negative
//! clip) is refused at validation with the field's name instead of silently training badly.

use super::error::AlgoError;

/// `value` must lie in [0, 1].
pub fn unit_interval(node: &'static str, field: &str, value: f32) -> Result<(), AlgoError> {
    if (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(AlgoError::invalid(
            node,
            format!("`{field}` must be in [0, 1], got {value}"),
        ))
    }
}

/// `value`, when set, must be > 0.
pub fn positive(node: &'static str, field: &str, value: Option<f32>) -> Result<(), AlgoError> {
    match value {
        Some(v) if v.is_nan() || v <= 0.0 => Err(AlgoError::invalid(
            node,
            format!("`{field}` must be > 0, got {v}"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert!(unit_interval("Gae", "gamma", 1.0).is_ok());
        let err = unit_interval("Gae", "gamma", 9.5).unwrap_err();
        assert_eq!(err.to_string(), "Gae: `gamma` must be in [0, 1], got 9.5");
        assert!(unit_interval("Gae", "gamma", f32::NAN).is_err());
        assert!(positive("x", "c", None).is_ok());
        assert!(positive("x", "c", Some(0.0)).is_err());
    }
}
