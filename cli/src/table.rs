//! Plain text tables: left-aligned columns separated by two spaces.

pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(header: &[&str]) -> Self {
        Table {
            header: header
                .iter()
                .map(std::string::ToString::to_string)
                .collect(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub(crate) fn render(&self) -> String {
        let cols = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(cols) {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        let mut line = |cells: &[String]| {
            let mut l = String::new();
            for (i, c) in cells.iter().enumerate().take(cols) {
                if i + 1 == cols {
                    l.push_str(c);
                } else {
                    l.push_str(&format!("{c:<w$}  ", w = widths[i]));
                }
            }
            out.push_str(l.trim_end());
            out.push('\n');
        };
        line(&self.header);
        for r in &self.rows {
            line(r);
        }
        out
    }
}

/// `1.2s`, `3m04s`, `1h02m` — short and stable.
pub(crate) fn duration(ms: Option<u64>) -> String {
    let Some(ms) = ms else { return "-".into() };
    if ms < 1_000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60)
    }
}

/// Dollars: cents above a cent, four decimals below one (agent calls often cost
/// fractions of a cent, which `$0.00` would hide), `<$0.0001` for less.
pub(crate) fn cost(usd: f64) -> String {
    if usd <= 0.0 || !usd.is_finite() {
        "$0.00".into()
    } else if usd >= 0.01 {
        format!("${usd:.2}")
    } else if usd >= 0.000_05 {
        format!("${usd:.4}")
    } else {
        "<$0.0001".into()
    }
}

/// `1,234 in · 56 out · 7,890 cache read · 0 cache write`.
pub(crate) fn tokens(t: &specbridge_engine::TokenUsage) -> String {
    format!(
        "{} in · {} out · {} cache read · {} cache write",
        thousands(t.input),
        thousands(t.output),
        thousands(t.cache_read),
        thousands(t.cache_creation)
    )
}

/// Every token, the short form for table cells: `1.2k`, `3.4M`.
pub(crate) fn tokens_short(t: &specbridge_engine::TokenUsage) -> String {
    let n = t.total();
    if n == 0 {
        "-".into()
    } else if n < 10_000 {
        thousands(n)
    } else if n < 10_000_000 {
        format!("{:.1}k", n as f64 / 1_000.0)
    } else {
        format!("{:.1}M", n as f64 / 1_000_000.0)
    }
}

pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_keep_four_decimals_below_a_cent() {
        for (usd, shown) in [
            (0.0, "$0.00"),
            (-1.0, "$0.00"),
            (f64::NAN, "$0.00"),
            (0.000_01, "<$0.0001"),
            (0.000_049, "<$0.0001"),
            (0.000_05, "$0.0001"),
            (0.0004, "$0.0004"),
            (0.001_36, "$0.0014"),
            (0.0032, "$0.0032"),
            (0.009_94, "$0.0099"),
            (0.01, "$0.01"),
            (0.0123, "$0.01"),
            (0.25, "$0.25"),
            (1.5, "$1.50"),
            (1234.567, "$1234.57"),
        ] {
            assert_eq!(cost(usd), shown, "{usd}");
        }
    }

    #[test]
    fn token_counts_read_at_a_glance() {
        let t = specbridge_engine::TokenUsage {
            input: 1_234_567,
            output: 80,
            cache_read: 12_000,
            cache_creation: 0,
        };
        assert_eq!(
            tokens(&t),
            "1,234,567 in · 80 out · 12,000 cache read · 0 cache write"
        );
        assert_eq!(tokens_short(&t), "1246.6k");
        assert_eq!(
            tokens_short(&specbridge_engine::TokenUsage {
                input: 400,
                output: 80,
                ..Default::default()
            }),
            "480"
        );
        assert_eq!(tokens_short(&Default::default()), "-");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
    }
}
