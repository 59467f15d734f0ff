//! OpenMetrics text (as `prometheus-client` writes it) rewritten as classic Prometheus text
//! format 0.0.4, line by line, without parsing values.
//!
//! The differences that matter for that encoder's output:
//! - a counter family `x` has `# HELP x` / `# TYPE x counter` and samples `x_total`; classic
//!   text names the family by its sample, `x_total` (so the `# HELP` is held until the
//!   `# TYPE` says what the family is);
//! - `info` families (`x` with samples `x_info`) become gauges named `x_info`; `stateset`
//!   becomes a gauge, `gaugehistogram` a histogram, `unknown` `untyped`;
//! - `# UNIT` and `# EOF` have no classic counterpart and are dropped, as are `x_created`
//!   samples of counters and histograms and exemplars (` # {...} v` after a sample's value).

/// Appends the classic text form of `openmetrics` to `out`.
pub fn from_openmetrics(openmetrics: &str, out: &mut String) {
    let mut help: Option<(&str, &str)> = None;
    let mut family = "";
    let mut drop_created = false;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            help = Some((name, text));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            let (suffix, classic_kind) = match kind.trim() {
                "counter" => ("_total", "counter"),
                "info" => ("_info", "gauge"),
                "gauge" | "stateset" => ("", "gauge"),
                "histogram" | "gaugehistogram" => ("", "histogram"),
                "summary" => ("", "summary"),
                _ => ("", "untyped"),
            };
            family = name;
            drop_created = matches!(kind.trim(), "counter" | "histogram" | "summary");
            if let Some((help_name, text)) = help.take() {
                if help_name == name {
                    push_line(out, &["# HELP ", name, suffix, " ", &unescape_help(text)]);
                }
            }
            push_line(out, &["# TYPE ", name, suffix, " ", classic_kind]);
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" || line.is_empty() {
            continue;
        }
        if line.starts_with('#') {
            push_line(out, &[line]);
            continue;
        }
        if drop_created && is_created_sample(line, family) {
            continue;
        }
        // An exemplar follows the value after " # ".
        let sample = line.split_once(" # ").map_or(line, |(s, _)| s);
        push_line(out, &[sample]);
    }
}

fn push_line(out: &mut String, parts: &[&str]) {
    for p in parts {
        out.push_str(p);
    }
    out.push('\n');
}

/// OpenMetrics escapes `"` in HELP; classic text escapes only `\` and newline.
fn unescape_help(text: &str) -> String {
    text.replace("\\\"", "\"")
}

fn is_created_sample(line: &str, family: &str) -> bool {
    line.strip_prefix(family)
        .and_then(|rest| rest.strip_prefix("_created"))
        .is_some_and(|rest| rest.starts_with(['{', ' ']))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert(om: &str) -> String {
        let mut out = String::new();
        from_openmetrics(om, &mut out);
        out
    }

    #[test]
    fn counter_family_is_named_by_its_total_series() {
        let om = "# HELP a_drops Drops by reason.\n# TYPE a_drops counter\n\
                  a_drops_total{reason=\"x\"} 3\na_drops_created{reason=\"x\"} 1.7e9\n# EOF\n";
        assert_eq!(
            convert(om),
            "# HELP a_drops_total Drops by reason.\n# TYPE a_drops_total counter\n\
             a_drops_total{reason=\"x\"} 3\n"
        );
    }

    #[test]
    fn gauges_and_histograms_keep_their_names_units_and_exemplars_go() {
        let om = "# HELP b_seconds Time.\n# TYPE b_seconds histogram\n# UNIT b_seconds seconds\n\
                  b_seconds_sum 1.5\nb_seconds_count 2\nb_seconds_bucket{le=\"0.1\"} 1 # {id=\"q\"} 0.05\n\
                  b_seconds_bucket{le=\"+Inf\"} 2\n# HELP c_active Active.\n# TYPE c_active gauge\n\
                  c_active 4\n# EOF\n";
        assert_eq!(
            convert(om),
            "# HELP b_seconds Time.\n# TYPE b_seconds histogram\nb_seconds_sum 1.5\n\
             b_seconds_count 2\nb_seconds_bucket{le=\"0.1\"} 1\nb_seconds_bucket{le=\"+Inf\"} 2\n\
             # HELP c_active Active.\n# TYPE c_active gauge\nc_active 4\n"
        );
    }

    #[test]
    fn info_becomes_a_gauge_and_help_quotes_are_unescaped() {
        let om = "# HELP d_build Build \\\"x\\\".\n# TYPE d_build info\nd_build_info{v=\"1\"} 1\n";
        assert_eq!(
            convert(om),
            "# HELP d_build_info Build \"x\".\n# TYPE d_build_info gauge\nd_build_info{v=\"1\"} 1\n"
        );
    }

    #[test]
    fn a_gauge_named_like_created_is_kept() {
        let om = "# HELP e Gauge.\n# TYPE e gauge\ne_created 5\n";
        assert!(convert(om).contains("e_created 5\n"));
    }
}
