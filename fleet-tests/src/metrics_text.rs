//! Reading numbers out of Prometheus / OpenMetrics text.

/// Sum of every sample of metric `name` (any labels), or `None` if there is none.
///
/// `name` is the sample name as exposed, e.g. `voxgate_relay_routes_installed_total`.
pub fn sum(text: &str, name: &str) -> Option<f64> {
    let mut total = None;
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        // The name must end here: next is the label set or the value.
        let value = match rest.as_bytes().first() {
            Some(b'{') => rest.split_once('}').map(|(_, v)| v),
            Some(b' ') => Some(rest),
            _ => None,
        };
        let Some(v) = value
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
        else {
            continue;
        };
        *total.get_or_insert(0.0) += v;
    }
    total
}

/// Sum of the samples of metric `name` whose label set contains `label` (e.g. `reason="x"`).
pub fn sum_with_label(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.strip_prefix(name))
        .filter_map(|rest| rest.strip_prefix('{'))
        .filter_map(|rest| rest.split_once('}'))
        .filter(|(labels, _)| labels.split(',').any(|kv| kv == label))
        .filter_map(|(_, v)| v.split_whitespace().next()?.parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP x_total a\n# TYPE x_total counter\n\
        x_total{worker=\"0\",direction=\"in\"} 3\nx_total{worker=\"1\",direction=\"in\"} 4.5\n\
        x_total_created 17\nx_totalish 9\ny 2\n";

    #[test]
    fn sums_every_label_set_of_exactly_that_name() {
        assert_eq!(sum(TEXT, "x_total"), Some(7.5));
        assert_eq!(sum(TEXT, "y"), Some(2.0));
        assert_eq!(sum(TEXT, "z"), None);
    }

    #[test]
    fn filters_by_one_label() {
        assert_eq!(sum_with_label(TEXT, "x_total", "worker=\"1\""), 4.5);
        assert_eq!(sum_with_label(TEXT, "x_total", "worker=\"7\""), 0.0);
    }
}
