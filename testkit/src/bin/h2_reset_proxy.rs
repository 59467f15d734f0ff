//! `h2-reset-proxy UPSTREAM PATH_SUFFIX BOT_SIDE_AFTER_MS`: the stream-resetting HTTP/2 proxy
//! of `voxgate_testkit::reset_proxy` as a process, for tests written in other languages (the
//! Python SDK's).
//!
//! Prints `listening ADDR` once it accepts connections, then reads commands on stdin, one per
//! line, and answers each on stdout: `reset` resets the matching streams open now (answers
//! `reset`), `count` answers `resets N`. It exits when stdin closes.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use voxgate_testkit::reset_proxy::ResetProxy;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [upstream, suffix, after_ms] = args.as_slice() else {
        eprintln!("usage: h2-reset-proxy UPSTREAM PATH_SUFFIX BOT_SIDE_AFTER_MS");
        return ExitCode::from(2);
    };
    let (Ok(upstream), Ok(after_ms)) = (upstream.parse::<SocketAddr>(), after_ms.parse::<u64>())
    else {
        eprintln!("h2-reset-proxy: UPSTREAM must be ip:port and BOT_SIDE_AFTER_MS a number");
        return ExitCode::from(2);
    };
    // The proxy matches paths for as long as the process lives.
    let suffix: &'static str = Box::leak(suffix.clone().into_boxed_str());
    let proxy = ResetProxy::start(upstream, suffix, Duration::from_millis(after_ms));
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening {}", proxy.addr);
    let _ = out.flush();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let answer = match line.trim() {
            "reset" => {
                proxy.reset_streams();
                "reset".to_owned()
            }
            "count" => format!("resets {}", proxy.resets()),
            other => format!("error unknown command {other:?}"),
        };
        let _ = writeln!(out, "{answer}");
        let _ = out.flush();
    }
    ExitCode::SUCCESS
}
