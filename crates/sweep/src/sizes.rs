//! Parsing of a `--sizes` specification: a comma-separated list whose items
//! are sizes (`1000`, `4k`, `2M`, `1G`) or doubling ranges (`1000..64000` means
//! 1000, 2000, 4000, … up to 64000). The result is strictly increasing and
//! positive, or an error message that says what was wrong.

/// Parses a sizes specification; the error is one line for the user.
pub fn parse_sizes(spec: &str) -> Result<Vec<u64>, String> {
    let mut sizes = Vec::new();
    for item in spec.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(format!("empty item in sizes `{spec}`"));
        }
        if let Some((from, to)) = item.split_once("..") {
            let (from, to) = (parse_one(from)?, parse_one(to)?);
            if to < from {
                return Err(format!(
                    "the range `{item}` goes down: write the smaller size first"
                ));
            }
            let mut n = from;
            while n <= to {
                sizes.push(n);
                n = match n.checked_mul(2) {
                    Some(next) => next,
                    None => break,
                };
            }
        } else {
            sizes.push(parse_one(item)?);
        }
    }
    for pair in sizes.windows(2) {
        if pair[1] <= pair[0] {
            return Err(format!(
                "sizes must increase: {} comes after {}",
                pair[1], pair[0]
            ));
        }
    }
    if sizes.len() < 2 {
        return Err(format!(
            "a sweep needs at least two sizes, got `{spec}` (e.g. 1000..16000)"
        ));
    }
    Ok(sizes)
}

/// One size: digits with an optional `k` (×10³), `M` (×10⁶) or `G` (×10⁹) suffix.
fn parse_one(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (digits, factor) = match text.char_indices().last() {
        Some((i, 'k' | 'K')) => (&text[..i], 1_000),
        Some((i, 'M')) => (&text[..i], 1_000_000),
        Some((i, 'G')) => (&text[..i], 1_000_000_000),
        _ => (text, 1),
    };
    let digits = digits.replace('_', "");
    let value: u64 = digits.parse().map_err(|_| {
        format!("not a size: `{text}` (expected e.g. 1000,2000,4000 or 1000..64000 or 1k..64k)")
    })?;
    let value = value
        .checked_mul(factor)
        .ok_or_else(|| format!("size `{text}` is too large"))?;
    if value == 0 {
        return Err(
            "sizes must be positive: 0 is not a size (the baseline is set with --baseline-size)"
                .to_string(),
        );
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_ranges_and_suffixes() {
        assert_eq!(
            parse_sizes("1000,2000,4000").unwrap(),
            vec![1000, 2000, 4000]
        );
        assert_eq!(
            parse_sizes("1000..8000").unwrap(),
            vec![1000, 2000, 4000, 8000]
        );
        assert_eq!(parse_sizes("1k..5k").unwrap(), vec![1000, 2000, 4000]);
        assert_eq!(parse_sizes("1..2, 10").unwrap(), vec![1, 2, 10]);
        assert_eq!(parse_sizes("1_000,2M").unwrap(), vec![1000, 2_000_000]);
    }

    #[test]
    fn rejects_nonsense_with_a_reason() {
        assert!(parse_sizes("0,1").unwrap_err().contains("positive"));
        assert!(parse_sizes("abc").unwrap_err().contains("not a size"));
        assert!(parse_sizes("4000,2000")
            .unwrap_err()
            .contains("must increase"));
        assert!(parse_sizes("8000..1000").unwrap_err().contains("goes down"));
        assert!(parse_sizes("1000").unwrap_err().contains("at least two"));
        assert!(parse_sizes("1000,,2000").unwrap_err().contains("empty"));
        assert!(parse_sizes("-5,10").unwrap_err().contains("not a size"));
        assert!(parse_sizes("99999999999999999999k,1").is_err());
    }
}
