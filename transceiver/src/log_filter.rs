//! Which log lines the transceiver writes: `RUST_LOG` (default `info`), with one module of a
//! dependency silenced unless `RUST_LOG` names it.
//!
//! `sctp_proto` (the data channel's SCTP, inside str0m) logs at WARN and ERROR about one
//! caller's association: a packet it cannot parse, a chunk it refuses, and the ABORT a browser
//! sends when it simply hangs up ("handle_inbound got err: abort chunk"). None of these is the
//! server's fault, a normal hang-up is not an error, and a hostile caller could make it log a
//! line per datagram. What matters of a data channel reaches the session as str0m events (it
//! opened, it closed) and the session logs those. An operator debugging SCTP says so:
//! `RUST_LOG=info,sctp_proto=debug`.

use tracing_subscriber::EnvFilter;

/// Dependencies whose logs are off unless `RUST_LOG` names them.
const QUIET_UNLESS_ASKED: [&str; 1] = ["sctp_proto"];

/// The filter for `RUST_LOG`'s value `env` (`None`: unset).
pub fn log_filter(env: Option<&str>) -> EnvFilter {
    let asked = env.unwrap_or("info");
    let mut filter = EnvFilter::try_new(asked).unwrap_or_else(|e| {
        eprintln!("RUST_LOG={asked:?} is not a valid filter ({e}); logging at info");
        EnvFilter::new("info")
    });
    for target in QUIET_UNLESS_ASKED {
        if !asked.contains(target) {
            if let Ok(off) = format!("{target}=off").parse() {
                filter = filter.add_directive(off);
            }
        }
    }
    filter
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sctp_proto_is_off_by_default_and_with_a_plain_level() {
        for env in [None, Some("info"), Some("debug,str0m=trace")] {
            let f = log_filter(env).to_string();
            assert!(f.contains("sctp_proto=off"), "{env:?}: {f}");
        }
    }

    #[test]
    fn an_operator_who_names_sctp_proto_gets_what_they_asked() {
        let f = log_filter(Some("info,sctp_proto=debug")).to_string();
        assert!(f.contains("sctp_proto=debug"), "{f}");
        assert!(!f.contains("sctp_proto=off"), "{f}");
    }

    #[test]
    fn a_bad_filter_falls_back_to_info() {
        let f = log_filter(Some("=[not a filter")).to_string();
        assert!(f.contains("info"), "{f}");
        assert!(f.contains("sctp_proto=off"), "{f}");
    }
}
