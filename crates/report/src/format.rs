//! Human-readable numbers: durations with a unit that fits, exponents with
//! their interval, ratios. Pure string formatting.

/// Seconds as a short human string (the one formatter, in the model so
/// that the sweep's messages use it too).
pub use slowlab_model::units::seconds;

/// An exponent and its interval: "N^1.97 [1.92–2.03]".
pub fn exponent(k: Option<f64>, ci: Option<[f64; 2]>) -> String {
    match (k, ci) {
        (Some(k), Some([lo, hi])) => format!("N^{k:.2} [{lo:.2}–{hi:.2}]"),
        (Some(k), None) => format!("N^{k:.2}"),
        _ => "—".to_string(),
    }
}

/// A ratio with sensible precision: "3.9", "785", "1.05".
pub fn ratio(r: f64) -> String {
    if !r.is_finite() {
        "?".to_string()
    } else if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 10.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.2}")
    }
}

/// An optional number with fixed decimals, "—" when absent.
pub fn opt(value: Option<f64>, decimals: usize) -> String {
    match value {
        Some(v) if v.is_finite() => format!("{v:.decimals$}"),
        _ => "—".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponents_and_ratios() {
        assert_eq!(
            exponent(Some(1.968), Some([1.92, 2.031])),
            "N^1.97 [1.92–2.03]"
        );
        assert_eq!(exponent(None, None), "—");
        assert_eq!(ratio(785.2), "785");
        assert_eq!(ratio(3.91), "3.91");
        assert_eq!(opt(None, 2), "—");
    }
}
