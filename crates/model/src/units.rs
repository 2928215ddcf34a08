//! How slowlab writes a duration for people: one formatter for every crate
//! (the sweep's progress and errors, the reports, the critical path).
//! Pure string formatting; the lab's copies of original programs' output
//! keep those programs' own number formats.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_pick_a_unit_that_fits() {
        assert_eq!(seconds(12e-6), "12 µs");
        assert_eq!(seconds(0.85), "850 ms");
        assert_eq!(seconds(2.3149), "2.31 s");
        assert_eq!(seconds(31.2), "31 s");
        assert_eq!(seconds(138.0), "2.3 min");
        assert_eq!(seconds(9000.0), "2.5 h");
        assert_eq!(seconds(-0.5), "-500 ms");
        assert_eq!(seconds(f64::NAN), "?");
    }
}
