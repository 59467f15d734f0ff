//! What the relay and the transceiver serve on `GET /metrics`, shared so both say it the same
//! way.
//!
//! Both binaries keep their metrics in a `prometheus-client` registry, which encodes only
//! OpenMetrics text. That is what Prometheus asks for first, but `curl`, `promtool check
//! metrics` and most other readers speak the classic Prometheus text format (0.0.4), where a
//! counter's `# TYPE` names its `_total` series and there is no `# EOF`. So:
//!
//! ```text
//!  Accept header ──► Format::negotiate ──► Classic (default) │ OpenMetrics (asked for, q > text/plain)
//!  registry's OpenMetrics text ──► render(text, format) ──► body:
//!       Classic:     classic_text::from_openmetrics(text) + process block (classic)
//!       OpenMetrics: text up to `# EOF` + process block (OpenMetrics) + `# EOF`
//! ```
//!
//! The process block is the standard `process_*` family set every Prometheus client library
//! exports (CPU seconds, resident and virtual memory, open and maximum file descriptors, start
//! time, threads), read from `/proc/self` at scrape time ([`process`]); dashboards and alerts
//! written for any process work unchanged. It is read per scrape, never on a packet path. If
//! procfs cannot be read (not Linux, a sandbox) the block is left out, not guessed.
//!
//! Depends on nothing of voxgate.

pub mod accept;
pub mod classic_text;
pub mod process;

pub use accept::Format;

/// The `/metrics` body for `format`, given the registry's OpenMetrics exposition.
pub fn render(openmetrics: &str, format: Format) -> String {
    let stats = process::ProcessStats::read_self().ok();
    let mut out = String::with_capacity(openmetrics.len() + 1024);
    match format {
        Format::Classic => {
            classic_text::from_openmetrics(openmetrics, &mut out);
            if let Some(s) = &stats {
                s.write(&mut out, Format::Classic);
            }
        }
        Format::OpenMetrics => {
            let body = openmetrics
                .trim_end()
                .strip_suffix("# EOF")
                .unwrap_or(openmetrics);
            out.push_str(body);
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            if let Some(s) = &stats {
                s.write(&mut out, Format::OpenMetrics);
            }
            out.push_str("# EOF\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const OM: &str =
        "# HELP x_drops Drops.\n# TYPE x_drops counter\nx_drops_total{reason=\"a\"} 3\n# EOF\n";

    #[test]
    fn classic_body_has_process_metrics_and_no_eof() {
        let body = render(OM, Format::Classic);
        assert!(body.contains("# TYPE x_drops_total counter\n"), "{body}");
        assert!(body.contains("\nprocess_cpu_seconds_total "), "{body}");
        assert!(body.contains("\nprocess_resident_memory_bytes "), "{body}");
        assert!(!body.contains("# EOF"), "{body}");
    }

    #[test]
    fn openmetrics_body_ends_with_one_eof_after_the_process_block() {
        let body = render(OM, Format::OpenMetrics);
        assert!(body.ends_with("# EOF\n"), "{body}");
        assert_eq!(body.matches("# EOF").count(), 1, "{body}");
        assert!(
            body.contains("# TYPE process_cpu_seconds counter\n"),
            "{body}"
        );
        assert!(body.find("x_drops_total").unwrap() < body.find("process_").unwrap());
    }
}
