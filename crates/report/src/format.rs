//! Human-readable numbers: durations with a unit that fits, exponents with
//! their interval, ratios. Pure string formatting.

/// Seconds as a short human string: "12 µs", "850 ms", "2.31 s", "31 s",
/// "2.3 min", "1.2 h".
pub fn seconds(s: f64) -> String {
    if !s.is_finite() {
        "?".to_string()
    } else if s.abs() < 1e-3 {
        format!("{:.0} µs", s * 1e6)
    } else if s.abs() < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else if s.abs() < 10.0 {
        format!("{s:.2} s")
    } else if s.abs() < 120.0 {
        format!("{s:.0} s")
    } else if s.abs() < 7200.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

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
    fn durations_pick_a_fitting_unit() {
        assert_eq!(seconds(12e-6), "12 µs");
        assert_eq!(seconds(0.85), "850 ms");
        assert_eq!(seconds(2.3149), "2.31 s");
        assert_eq!(seconds(31.2), "31 s");
        assert_eq!(seconds(138.0), "2.3 min");
        assert_eq!(seconds(f64::NAN), "?");
    }

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
