//! Small text helpers every room uses: a text cut to a length, a byte size as a person reads it.
//! A leaf: it imports nothing from the crate, so the lowest room may use it.

/// `text` cut to at most `max` characters, with "…" after a cut; shorter text as it is.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// `980 bytes`, `20 KB`, `1.5 MB`, `5.4 GB`: a size as a person reads it. Decimal units
/// (1 KB = 1000 bytes), as `daemon.max_attachment_bytes` is written and documented ("20 MB" is
/// 20,000,000) and as disks are sold; one decimal below 10, none from there on, and no ".0".
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if n < 1000 {
        return format!("{n} bytes");
    }
    let mut value = n as f64 / 1000.0;
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    let shown = if value < 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.0}")
    };
    let shown = shown.strip_suffix(".0").unwrap_or(&shown);
    format!("{shown} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clip_counts_characters_and_marks_the_cut() {
        assert_eq!(clip("hello", 5), "hello");
        assert_eq!(clip("hello", 4), "hell…");
        assert_eq!(clip("héllo wörld", 7), "héllo w…");
        assert_eq!(clip("", 0), "");
        assert_eq!(clip("a", 0), "…");
    }

    #[test]
    fn sizes_read_in_decimal_units() {
        assert_eq!(bytes(0), "0 bytes");
        assert_eq!(bytes(984), "984 bytes");
        assert_eq!(bytes(1000), "1 KB");
        assert_eq!(bytes(2048), "2 KB");
        assert_eq!(bytes(1_500_000), "1.5 MB");
        assert_eq!(bytes(20_000_000), "20 MB");
        assert_eq!(bytes(999_999), "1000 KB");
        assert_eq!(bytes(5 * 1024 * 1024 * 1024), "5.4 GB");
        assert_eq!(bytes(3_000_000_000_000_000), "3000 TB");
    }
}
