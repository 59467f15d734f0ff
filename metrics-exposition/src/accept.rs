//! Which exposition format a scraper gets, from its `Accept` header.
//!
//! Classic Prometheus text (0.0.4) unless the header names `application/openmetrics-text`
//! with a higher quality than `text/plain` (absent `text/plain` counts as q=0). Prometheus
//! itself sends `application/openmetrics-text;version=1.0.0,...,text/plain;version=0.0.4;q=0.5`
//! and so gets OpenMetrics; `curl`, `promtool check metrics` and a browser get classic text.

/// An exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4.
    Classic,
    /// OpenMetrics 1.0.0 text.
    OpenMetrics,
}

impl Format {
    /// The format for a request with this `Accept` header value (`None`: no header).
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Classic;
        };
        let (mut om, mut text) = (0.0f32, 0.0f32);
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.strip_prefix("q="))
                .find_map(|v| v.parse::<f32>().ok())
                .unwrap_or(1.0);
            match media.as_str() {
                "application/openmetrics-text" => om = om.max(q),
                "text/plain" => text = text.max(q),
                _ => {}
            }
        }
        if om > 0.0 && om > text {
            Format::OpenMetrics
        } else {
            Format::Classic
        }
    }

    /// The `Content-Type` of a body in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Classic => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_scraper_gets_openmetrics() {
        let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                    version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prom)), Format::OpenMetrics);
    }

    #[test]
    fn no_header_wildcard_or_text_preferred_gets_classic() {
        assert_eq!(Format::negotiate(None), Format::Classic);
        assert_eq!(Format::negotiate(Some("*/*")), Format::Classic);
        assert_eq!(
            Format::negotiate(Some("text/plain, application/openmetrics-text;q=0.5")),
            Format::Classic
        );
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;q=0")),
            Format::Classic
        );
        assert_eq!(Format::negotiate(Some(";;,q=abc")), Format::Classic);
    }
}
