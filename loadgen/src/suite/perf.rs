//! `perf` profiles of a server during a run's measurement window, kept as the top lines of
//! `perf report` for the report's "why" notes, and every sample split by component for
//! "Where a packet's CPU goes".

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::session_load::LoadConfig;

/// A `perf` profile of a server during a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerProfile {
    pub scenario: String,
    pub top: Vec<String>,
    /// Every sample of the profile, by component ([`breakdown`]).
    pub breakdown: Vec<Share>,
}

/// One component's share of a profile's samples, in percent.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Share {
    pub component: String,
    pub percent: f64,
}

/// Symbol-name fragments of libopus (linked statically into the transceiver).
pub const LIBOPUS_SYMBOLS: &[&str] = &[
    "opus",
    "silk",
    "celt",
    "clt_",
    "quant",
    "pulses",
    "deemphasis",
    "exp_rotation",
    "compute_theta",
    "ec_dec",
    "ec_enc",
    "pitch",
    "mdct",
    "kf_bfly",
];
/// Symbol-name fragments of SRTP and DTLS cryptography (aws-lc).
pub const CRYPTO_SYMBOLS: &[&str] = &[
    "aes", "gcm", "aead", "sha", "hmac", "aws_lc", "p384", "montj", "ecdsa",
];

/// The components of a transceiver profile, each with the symbol (or DSO) fragments that
/// place a sample in it; a sample goes to the first component that matches.
const COMPONENTS: &[(&str, &[&str])] = &[
    ("kernel (socket I/O, wakeups, scheduling)", &["[kernel"]),
    ("libopus", LIBOPUS_SYMBOLS),
    (
        "gRPC hop (tokio, HTTP/2, protobuf)",
        &[
            "tokio",
            "h2::",
            "hyper",
            "tonic",
            "prost",
            "tower",
            "http_body",
            "axum",
        ],
    ),
    (
        "str0m (RTP, RTCP, ICE, DTLS and SCTP logic)",
        &["str0m", "dimpl", "sctp", "IceAgent", "is::"],
    ),
    (
        "voxgate (loop, demux, session, bridge)",
        &["voxgate", "udp_batch", "mio::"],
    ),
    // After the Rust crates: the short crypto fragments ("sha", "aes") would otherwise claim
    // a symbol like `tokio::…::Shared`.
    ("SRTP and DTLS crypto", CRYPTO_SYMBOLS),
    (
        "memory (copies, allocation)",
        &[
            "memmove",
            "memcpy",
            "memset",
            "malloc",
            "_int_free",
            "__libc_free",
            "realloc",
            "cfree",
        ],
    ),
];

/// Splits `perf report --sort dso,symbol` lines (as [`tidy_perf_line`] leaves them:
/// `12.02%  dso  symbol`) into [`COMPONENTS`] and "other", largest first.
pub fn breakdown(lines: &[String]) -> Vec<Share> {
    let mut shares: Vec<Share> = COMPONENTS
        .iter()
        .map(|(c, _)| c.to_string())
        .chain(["other".to_string()])
        .map(|component| Share {
            component,
            percent: 0.0,
        })
        .collect();
    for line in lines {
        let Some(pct) = line
            .split_whitespace()
            .next()
            .and_then(|p| p.strip_suffix('%'))
            .and_then(|p| p.parse::<f64>().ok())
        else {
            continue;
        };
        let lower = line.to_ascii_lowercase();
        let i = COMPONENTS
            .iter()
            .position(|(_, frags)| {
                frags
                    .iter()
                    .any(|f| lower.contains(&f.to_ascii_lowercase()))
            })
            .unwrap_or(COMPONENTS.len());
        shares[i].percent += pct;
    }
    shares.retain(|s| s.percent > 0.0);
    shares.sort_by(|a, b| b.percent.total_cmp(&a.percent));
    shares
}

/// Records a `perf` profile of `pid` during the measurement window of a run that starts
/// now (its ramp and settle are estimated from the config), for at most `perf_secs`, its
/// data in `work_dir`.
pub fn record_during(
    work_dir: &Path,
    perf_secs: f64,
    scenario: &str,
    pid: u32,
    cfg: &LoadConfig,
) -> std::thread::JoinHandle<Option<ServerProfile>> {
    let delay = Duration::from_secs_f64(cfg.sessions as f64 / cfg.rate + 3.0);
    let secs = perf_secs.min(cfg.hold.as_secs_f64());
    let data = work_dir.join(format!("perf-{pid}.data"));
    let scenario = scenario.to_string();
    std::thread::spawn(move || {
        std::thread::sleep(delay);
        let rec = Command::new("perf")
            .args(["record", "-q", "-F", "499", "-p", &pid.to_string(), "-o"])
            .arg(&data)
            .args(["--", "sleep", &format!("{secs}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        if !rec.success() {
            return None;
        }
        let out = Command::new("perf")
            .args([
                "report",
                "--stdio",
                "--no-children",
                "--sort",
                "dso,symbol",
                "-i",
            ])
            .arg(&data)
            .stderr(Stdio::null())
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let all: Vec<String> = text
            .lines()
            .filter(|l| !l.starts_with('#') && l.contains('%'))
            .map(tidy_perf_line)
            .collect();
        let _ = fs::remove_file(&data);
        let breakdown = breakdown(&all);
        let top: Vec<String> = all.into_iter().take(20).collect();
        (!top.is_empty()).then_some(ServerProfile {
            scenario,
            top,
            breakdown,
        })
    })
}

/// `  12.02%  [kernel.kallsyms]  [k] finish_task_switch   -   -` → `12.02%  [kernel.kallsyms]  finish_task_switch`.
fn tidy_perf_line(line: &str) -> String {
    line.split_whitespace()
        .filter(|w| *w != "-" && *w != "[.]" && *w != "[k]")
        .collect::<Vec<_>>()
        .join("  ")
}

#[cfg(test)]
mod tests {
    use crate::suite::perf::*;

    #[test]
    fn samples_go_to_the_first_component_that_names_them() {
        let lines: Vec<String> = [
            "10.00%  [kernel.kallsyms]  _raw_spin_unlock_irqrestore",
            "5.00%  transceiver  str0m::session::Session::handle_timeout",
            "4.00%  transceiver  silk_NSQ_del_dec_c",
            "3.00%  transceiver  aws_lc_0_29_aes_gcm_dec_update_vaes_avx2",
            "2.00%  transceiver  tokio::sync::mpsc::chan::Tx<T,S>::send",
            "1.50%  transceiver  h2::proto::streams::prioritize::Prioritize::pop_frame",
            "1.00%  transceiver  voxgate_transceiver::media::session::Session::handle_datagram",
            "0.75%  libc.so.6  __memmove_avx512_unaligned_erms",
            "0.25%  transceiver  core::fmt::write",
            "not a sample line",
        ]
        .map(String::from)
        .to_vec();
        let b = breakdown(&lines);
        let pct = |c: &str| {
            b.iter()
                .find(|s| s.component.starts_with(c))
                .map_or(0.0, |s| s.percent)
        };
        assert_eq!(pct("kernel"), 10.0);
        assert_eq!(pct("str0m"), 5.0);
        assert_eq!(pct("libopus"), 4.0);
        assert_eq!(pct("SRTP"), 3.0);
        assert_eq!(pct("gRPC"), 3.5);
        assert_eq!(pct("voxgate"), 1.0);
        assert_eq!(pct("memory"), 0.75);
        assert_eq!(pct("other"), 0.25);
        assert_eq!(b[0].component, COMPONENTS[0].0, "largest first");
    }
}
