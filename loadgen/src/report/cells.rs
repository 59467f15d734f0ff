//! What goes in a table cell: numbers as the report prints them, and verdicts against a
//! target ("met", or missed by how much).

use crate::stats::median;

/// The median of `f` over `runs`.
pub fn med<T>(runs: &[T], f: impl Fn(&T) -> f64) -> Option<f64> {
    median(&runs.iter().map(f).collect::<Vec<_>>())
}

pub fn num(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "–".into(),
    }
}

pub fn thousands(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => {
            let s = format!("{:.0}", v);
            let neg = s.starts_with('-');
            let digits: Vec<char> = s.trim_start_matches('-').chars().collect();
            let groups: Vec<String> = digits
                .rchunks(3)
                .rev()
                .map(|g| g.iter().collect())
                .collect();
            let out = groups.join(",");
            if neg {
                format!("-{out}")
            } else {
                out
            }
        }
        _ => "–".into(),
    }
}

/// "met" or "missed by …", for a measured value that must stay at or below `limit`.
pub fn at_most(measured: Option<f64>, limit: f64, unit: &str) -> String {
    match measured {
        None => "not measured".into(),
        Some(m) if m <= limit => format!("**met** ({:.0} % of the limit)", 100.0 * m / limit),
        Some(m) => format!(
            "**missed** by {:.3} {unit} ({:.2}× the limit)",
            m - limit,
            m / limit
        ),
    }
}

/// For a measured value that must be at least `limit`.
pub fn at_least(measured: Option<f64>, limit: f64) -> String {
    match measured {
        None => "not measured".into(),
        Some(m) if m >= limit => "**met**".into(),
        Some(m) => format!(
            "**missed** by {:.3} ({:.0} % of the target)",
            limit - m,
            100.0 * m / limit
        ),
    }
}

#[cfg(test)]
mod tests {
    use crate::report::cells::*;

    #[test]
    fn verdicts_say_by_how_much() {
        assert!(at_most(Some(0.5), 1.0, "ms").starts_with("**met**"));
        assert!(at_most(Some(1.5), 1.0, "ms").contains("missed** by 0.500 ms"));
        assert_eq!(at_most(None, 1.0, "ms"), "not measured");
        assert!(at_least(Some(0.8), 0.9).contains("89 %"));
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(Some(1234567.4)), "1,234,567");
        assert_eq!(thousands(Some(999.0)), "999");
        assert_eq!(thousands(None), "–");
    }
}
