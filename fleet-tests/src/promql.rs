//! The PromQL a deployment ships, pulled out of its files: every `expr` of a Grafana
//! dashboard's panels (rows' nested panels included), every alerting rule of a Prometheus
//! rules file, and an alert's *signals*: the expression without its threshold, which is what
//! must return data for the alert to be able to fire at all (`x > 0.8` is empty while all is
//! well, but `x` is not, unless the metric is misspelt or gone).

use serde_json::Value;
use yaml_rust2::{Yaml, YamlLoader};

/// One query of a dashboard panel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PanelQuery {
    pub panel: String,
    pub expr: String,
}

/// One alerting rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertRule {
    pub name: String,
    pub expr: String,
    /// The `for:` duration as written (`None` if absent).
    pub for_: Option<String>,
    pub has_summary: bool,
    pub has_description: bool,
}

/// Why a file's queries could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PromqlFileError {
    #[error("dashboard JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("rules YAML: {0}")]
    Yaml(#[from] yaml_rust2::ScanError),
    #[error("rules file has no groups")]
    NoGroups,
}

/// Every target expression of every panel of a dashboard.
pub fn dashboard_queries(json: &str) -> Result<Vec<PanelQuery>, PromqlFileError> {
    let dash: Value = serde_json::from_str(json)?;
    let mut out = Vec::new();
    collect_panels(&dash["panels"], &mut out);
    Ok(out)
}

fn collect_panels(panels: &Value, out: &mut Vec<PanelQuery>) {
    for p in panels.as_array().into_iter().flatten() {
        let title = p["title"].as_str().unwrap_or("(untitled)");
        for t in p["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = t["expr"].as_str() {
                out.push(PanelQuery {
                    panel: title.to_owned(),
                    expr: expr.to_owned(),
                });
            }
        }
        collect_panels(&p["panels"], out);
    }
}

/// Every alerting rule (recording rules are skipped) of a Prometheus rules file.
pub fn alert_rules(yaml: &str) -> Result<Vec<AlertRule>, PromqlFileError> {
    let docs = YamlLoader::load_from_str(yaml)?;
    let groups = docs
        .first()
        .and_then(|d| d["groups"].as_vec())
        .ok_or(PromqlFileError::NoGroups)?;
    let mut out = Vec::new();
    for g in groups {
        for r in g["rules"].as_vec().into_iter().flatten() {
            let (Some(name), Some(expr)) = (r["alert"].as_str(), yaml_expr(&r["expr"])) else {
                continue;
            };
            let annotation = |k: &str| r["annotations"][k].as_str().is_some_and(|s| !s.is_empty());
            out.push(AlertRule {
                name: name.to_owned(),
                expr,
                for_: r["for"].as_str().map(str::to_owned),
                has_summary: annotation("summary"),
                has_description: annotation("description"),
            });
        }
    }
    Ok(out)
}

fn yaml_expr(v: &Yaml) -> Option<String> {
    match v {
        Yaml::String(s) => Some(s.trim().to_owned()),
        _ => None,
    }
}

/// The signals of an alert expression: its operands of top-level `and` / `or` / `unless`,
/// each without a trailing top-level comparison against a number (`x > 0.8` → `x`).
pub fn signals(expr: &str) -> Vec<String> {
    split_top_level(expr, &["and", "or", "unless"])
        .into_iter()
        .map(|part| strip_threshold(&part))
        .collect()
}

/// `expr` split at the binary set operators `ops` that stand outside any parentheses,
/// brackets, braces or string; an operator's `on (...)` / `ignoring (...)` modifier goes too.
fn split_top_level(expr: &str, ops: &[&str]) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut in_string = false;
    let mut start = 0;
    let bytes = expr.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if in_string {
            in_string = c != b'"' || bytes[i - 1] == b'\\';
            i += 1;
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            _ if depth == 0 && (i == 0 || bytes[i - 1] == b' ') => {
                if let Some(op) = ops.iter().find(|op| word_at(expr, i, op)) {
                    parts.push(expr[start..i].trim().to_owned());
                    i = skip_modifier(expr, i + op.len());
                    start = i;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(expr[start..].trim().to_owned());
    parts
}

/// Whether word `w` stands at byte `i` of `s`, followed by a space or `(`.
fn word_at(s: &str, i: usize, w: &str) -> bool {
    s[i..].starts_with(w) && matches!(s.as_bytes().get(i + w.len()), Some(b' ' | b'('))
}

/// The index after `on (...)` / `ignoring (...)` / `group_left (...)` following a set operator.
fn skip_modifier(s: &str, mut i: usize) -> usize {
    loop {
        let rest = s[i..].trim_start();
        let at = s.len() - rest.len();
        let Some(word) = ["on", "ignoring", "group_left", "group_right"]
            .into_iter()
            .find(|w| word_at(s, at, w))
        else {
            return i;
        };
        let after = s[at + word.len()..].trim_start();
        let open = s.len() - after.len();
        if !after.starts_with('(') {
            return at + word.len();
        }
        match s[open..].find(')') {
            Some(close) => i = open + close + 1,
            None => return s.len(),
        }
    }
}

/// `part` without a trailing top-level `<op> <number>` comparison.
fn strip_threshold(part: &str) -> String {
    for op in [">=", "<=", "==", "!=", ">", "<"] {
        let pieces = split_top_level_symbol(part, op);
        if let Some((lhs, rhs)) = pieces {
            if rhs.trim().parse::<f64>().is_ok() {
                return lhs.trim().to_owned();
            }
        }
    }
    part.trim().to_owned()
}

/// `s` split at the last top-level occurrence of comparison `op`.
fn split_top_level_symbol<'a>(s: &'a str, op: &str) -> Option<(&'a str, &'a str)> {
    let mut depth = 0i32;
    let mut in_string = false;
    let mut found = None;
    let bytes = s.as_bytes();
    for i in 0..bytes.len() {
        let c = bytes[i];
        if in_string {
            in_string = c != b'"' || bytes[i - 1] == b'\\';
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            _ if depth == 0 && s[i..].starts_with(op) => {
                // `>` must not be the start or end of `>=`, `=~` and friends.
                let next = bytes.get(i + op.len()).copied();
                let prev = i.checked_sub(1).map(|p| bytes[p]);
                let glued = matches!(next, Some(b'=' | b'~'))
                    || (op.len() == 1 && matches!(prev, Some(b'<' | b'>' | b'=' | b'!')));
                if !glued {
                    found = Some(i);
                }
            }
            _ => {}
        }
    }
    found.map(|i| (&s[..i], &s[i + op.len()..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_and_set_operators_are_taken_off() {
        assert_eq!(signals("up{job=\"a\"} == 0"), ["up{job=\"a\"}"]);
        assert_eq!(
            signals("max by (i) (x{l=~\"a|>b\"}) > 0.8"),
            ["max by (i) (x{l=~\"a|>b\"})"]
        );
        assert_eq!(
            signals("max by (i) (c) < 1 and on (i) sum by (i) (increase(e[5m])) > 0"),
            ["max by (i) (c)", "sum by (i) (increase(e[5m]))"]
        );
        assert_eq!(signals("a / b >= 1e-3"), ["a / b"]);
        assert_eq!(signals("a > b"), ["a > b"], "no number: kept whole");
        assert_eq!(
            signals("sum(rate(x_total[5m]))"),
            ["sum(rate(x_total[5m]))"]
        );
    }

    #[test]
    fn dashboard_targets_in_rows_are_found() {
        let json = r#"{"panels":[{"title":"A","targets":[{"expr":"up"}]},
            {"type":"row","title":"R","panels":[{"title":"B","targets":[{"expr":"x"},{"refId":"C"}]}]}]}"#;
        let q = dashboard_queries(json).unwrap();
        assert_eq!(
            q.iter()
                .map(|q| (q.panel.as_str(), q.expr.as_str()))
                .collect::<Vec<_>>(),
            [("A", "up"), ("B", "x")]
        );
    }

    #[test]
    fn alert_rules_with_for_and_annotations() {
        let yaml = "groups:\n  - name: g\n    rules:\n      - record: r\n        expr: up\n\
                    \x20     - alert: A\n        expr: up == 0\n        for: 1m\n\
                    \x20       annotations:\n          summary: s\n";
        let rules = alert_rules(yaml).unwrap();
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].name, "A");
        assert_eq!(rules[0].expr, "up == 0");
        assert_eq!(rules[0].for_.as_deref(), Some("1m"));
        assert!(rules[0].has_summary && !rules[0].has_description);
    }
}
