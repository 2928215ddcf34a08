//! How slowlab writes a duration for people, and reads one from them: one
//! formatter for every crate (the sweep's progress and errors, the reports,
//! the critical path) and one parser for every command-line duration.
//! Pure string work; the lab's copies of original programs' output keep
//! those programs' own number formats.

/// Seconds as a short human string: "12 µs", "850 ms", "2.31 s", "31 s",
/// "2.3 min", "1.2 h".
pub fn seconds(s: f64) -> String {
    if !s.is_finite() {
        "?".to_string()
    } else if (s * 1e6).round() == 0.0 {
        // Not "-0 µs": an empty sum of f64s is -0.0, and -0.4 µs rounds to it.
        "0 µs".to_string()
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

/// A duration as people write it, in seconds: `"90"`, `"90s"`, `"1.5m"`,
/// `"2min"`, `"1h"`, `"500ms"`; within `[min, max]` seconds. The error
/// says what was expected.
pub fn parse_seconds(text: &str, min: f64, max: f64) -> Result<f64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (e.g. 90, 90s, 500ms, 5m, 1h)"))?;
    let factor = match unit.trim() {
        "" | "s" | "sec" => 1.0,
        "ms" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "unknown time unit `{other}` in `{text}` (use ms, s, m or h)"
            ))
        }
    };
    let s = value * factor;
    if !(s.is_finite() && s >= min && s <= max) {
        return Err(if max.is_finite() {
            format!(
                "the duration `{text}` must be from {} to {}",
                seconds(min),
                seconds(max)
            )
        } else {
            format!("the duration `{text}` must be at least {}", seconds(min))
        });
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_with_and_without_units_within_bounds() {
        let any = |t| parse_seconds(t, 1e-3, f64::INFINITY);
        assert_eq!(any("90"), Ok(90.0));
        assert_eq!(any("120s"), Ok(120.0));
        assert_eq!(any("1.5m"), Ok(90.0));
        assert_eq!(any("2min"), Ok(120.0));
        assert_eq!(any("1h"), Ok(3600.0));
        assert_eq!(any("500ms"), Ok(0.5));
        for bad in ["0s", "ten", "5 parsecs", "", "-3", "0.0001"] {
            assert!(any(bad).is_err(), "{bad:?}");
        }
        assert!(parse_seconds("601", 0.5, 600.0)
            .unwrap_err()
            .contains("from 500 ms to 10.0 min"));
        assert_eq!(parse_seconds("600", 0.5, 600.0), Ok(600.0));
    }

    #[test]
    fn seconds_pick_a_unit_that_fits() {
        assert_eq!(seconds(12e-6), "12 µs");
        assert_eq!(seconds(-0.0), "0 µs");
        assert_eq!(seconds(-4e-7), "0 µs");
        assert_eq!(seconds(-12e-6), "-12 µs");
        assert_eq!(seconds(0.85), "850 ms");
        assert_eq!(seconds(2.3149), "2.31 s");
        assert_eq!(seconds(31.2), "31 s");
        assert_eq!(seconds(138.0), "2.3 min");
        assert_eq!(seconds(9000.0), "2.5 h");
        assert_eq!(seconds(-0.5), "-500 ms");
        assert_eq!(seconds(f64::NAN), "?");
    }
}
