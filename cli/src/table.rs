//! Plain text tables: left-aligned columns separated by two spaces.

pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
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
pub fn duration(ms: Option<u64>) -> String {
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

pub fn cost(usd: f64) -> String {
    format!("${usd:.2}")
}
