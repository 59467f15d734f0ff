//! Peers, same run: Janus's echotest against voxgate's passthrough + echo backend, both in a
//! network namespace reached over a veth pair (Janus will not gather loopback candidates);
//! and coturn against the voxgate relay, from the relay scenario's runs.

use std::fmt::Write as _;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use voxgate_proto::bridge::AudioMode;

use crate::backend::Behaviour;
use crate::report::cells::{med, num, thousands};
use crate::report::runs::{cpu_per_session, server, us_per_packet};
use crate::scenarios::relay::RelaySection;
use crate::session_load::{self, LoadConfig, LoadResult, Target};
use crate::suite::process::{free_tcp_port, wait_tcp, which, Proc};
use crate::suite::runner::{Ledger, Runner};
use crate::suite::servers::TransceiverOpts;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PeersSection {
    pub skipped: Option<String>,
    pub sessions: usize,
    pub voxgate: Vec<LoadResult>,
    pub janus: Vec<LoadResult>,
    pub janus_version: String,
}

/// voxgate then Janus, once per repetition; skipped (with why) without the namespace or
/// without Janus.
pub fn run<R: Ledger>(s: &mut Runner<R>, section: fn(&mut R) -> &mut PeersSection) {
    let n = s.plan.peer_sessions;
    section(&mut s.results).sessions = n;
    if n == 0 {
        return;
    }
    let Some(ns) = s.args.peer_netns.clone() else {
        section(&mut s.results).skipped = Some(
            "no network namespace for the peer servers (scripts/bench could not create one)".into(),
        );
        return;
    };
    let janus = match janus_files() {
        Ok(j) => j,
        Err(e) => {
            section(&mut s.results).skipped = Some(format!("{e:#}"));
            return;
        }
    };
    section(&mut s.results).janus_version = janus.version.clone();
    for rep in 0..s.plan.reps {
        s.say(&format!(
            "peers: voxgate passthrough echo, {n} sessions (rep {})",
            rep + 1
        ));
        match voxgate_run(s, &ns, n) {
            Ok(r) => section(&mut s.results).voxgate.push(r),
            Err(e) => s.record_error("peers voxgate", e),
        }
        s.say(&format!(
            "peers: Janus echotest, {n} sessions (rep {})",
            rep + 1
        ));
        match janus_run(s, &janus, &ns, n) {
            Ok(r) => section(&mut s.results).janus.push(r),
            Err(e) => s.record_error("peers janus", e),
        }
    }
}

fn voxgate_run<R: Ledger>(s: &mut Runner<R>, ns: &str, n: usize) -> anyhow::Result<LoadResult> {
    let o = TransceiverOpts {
        ip: s.args.peer_ns_ip,
        netns: Some(ns),
        ..TransceiverOpts::default()
    };
    let t = s.start_transceiver("peer-voxgate", &o)?;
    let mut cfg = s.load_config(&t, n, 50.0);
    cfg.bind_ip = s.args.peer_host_ip;
    cfg.backend = Some(s.backend(&t, n, AudioMode::OpusPassthrough, Behaviour::Echo));
    session_load::run(&cfg)
}

fn janus_run<R: Ledger>(
    s: &mut Runner<R>,
    janus: &JanusFiles,
    ns: &str,
    n: usize,
) -> anyhow::Result<LoadResult> {
    let port = free_tcp_port(s.args.peer_host_ip).unwrap_or(28088);
    let dir = s.args.work_dir.join("janus");
    janus.write_config(&dir, port, s.args.peer_ns_ip, &s.args.peer_ns_if)?;
    let mut cmd = s.server_command(Some(ns), Path::new(&janus.binary));
    cmd.arg("-F")
        .arg(&dir)
        .arg("-C")
        .arg(dir.join("janus.jcfg"));
    let log = s.log_path("janus");
    let proc = Proc::spawn("janus", cmd, &log)?;
    let api = SocketAddr::new(s.args.peer_ns_ip, port);
    wait_tcp(api, Duration::from_secs(15))
        .with_context(|| format!("janus did not start (log: {})", log.display()))?;
    let mut cfg = LoadConfig {
        target: Target::Janus {
            url: format!("http://{api}/janus"),
        },
        server_pid: Some(proc.pid()),
        bind_ip: s.args.peer_host_ip,
        ..janus_load_config(s, n, 50.0)
    };
    cfg.teardown = true;
    let r = session_load::run(&cfg);
    drop(proc);
    r
}

/// The load against Janus: the suite's load shape, with a longer connect timeout and no
/// injected loss (its target and server are filled in by the caller).
fn janus_load_config<R: Ledger>(s: &Runner<R>, sessions: usize, rate: f64) -> LoadConfig {
    LoadConfig {
        target: Target::Voxgate {
            url: String::new(),
            token: None,
        },
        sessions,
        rate,
        hold: Duration::from_secs_f64(s.plan.hold_secs),
        settle: Duration::from_secs(1),
        connect_timeout: Duration::from_secs(15),
        audio: true,
        data_channel: false,
        uplink_loss: 0.0,
        seed: s.seed(),
        signaling_threads: 4,
        server_pid: None,
        backend: None,
        progress: true,
        bind_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
        teardown: false,
        metrics_url: None,
        window_hooks: Default::default(),
    }
}

/// Where Debian's janus package put its binary and plugins.
struct JanusFiles {
    binary: String,
    lib: PathBuf,
    version: String,
}

fn janus_files() -> anyhow::Result<JanusFiles> {
    let binary = which("janus").context("Janus is not installed (Debian package janus)")?;
    let lib = [
        "/usr/lib/x86_64-linux-gnu/janus",
        "/usr/lib/aarch64-linux-gnu/janus",
        "/usr/lib/janus",
        "/usr/local/lib/janus",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.join("plugins/libjanus_echotest.so").exists())
    .context("Janus's echotest plugin (libjanus_echotest.so) was not found")?;
    let version = Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", "janus"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    Ok(JanusFiles {
        binary: binary.to_string_lossy().into_owned(),
        lib,
        version,
    })
}

impl JanusFiles {
    /// A minimal configuration: HTTP transport and the echotest plugin only, ICE on one
    /// interface, no session timeout (the load keeps sessions without keepalives).
    fn write_config(&self, dir: &Path, port: u16, ip: IpAddr, iface: &str) -> anyhow::Result<()> {
        for sub in ["plugins", "transports", "events", "loggers"] {
            fs::create_dir_all(dir.join(sub))?;
        }
        for (sub, so) in [
            ("plugins", "libjanus_echotest.so"),
            ("transports", "libjanus_http.so"),
        ] {
            let link = dir.join(sub).join(so);
            let _ = fs::remove_file(&link);
            std::os::unix::fs::symlink(self.lib.join(sub).join(so), &link)?;
        }
        let d = dir.display();
        fs::write(
            dir.join("janus.jcfg"),
            format!(
                "general: {{\n  configs_folder = \"{d}\"\n  plugins_folder = \"{d}/plugins\"\n  transports_folder = \"{d}/transports\"\n  events_folder = \"{d}/events\"\n  loggers_folder = \"{d}/loggers\"\n  log_to_stdout = true\n  debug_level = 3\n  session_timeout = 0\n}}\ncertificates: {{\n}}\nmedia: {{\n  rtp_port_range = \"42000-60000\"\n}}\nnat: {{\n  ice_enforce_list = \"{iface}\"\n  ignore_mdns = true\n}}\nplugins: {{\n}}\ntransports: {{\n}}\nevents: {{\n}}\nloggers: {{\n}}\n"
            ),
        )?;
        fs::write(
            dir.join("janus.transport.http.jcfg"),
            format!("general: {{\n  json = \"compact\"\n  base_path = \"/janus\"\n  http = true\n  port = {port}\n  ip = \"{ip}\"\n  https = false\n}}\nadmin: {{\n  admin_http = false\n}}\n"),
        )?;
        fs::write(dir.join("janus.plugin.echotest.jcfg"), "general: {\n}\n")?;
        Ok(())
    }
}

// ---- report --------------------------------------------------------------------------------

/// The "Peers, same run" section: Janus against voxgate, then coturn against the relay.
pub fn section(md: &mut String, p: &PeersSection, relay: &RelaySection) {
    let _ = writeln!(md, "## Peers, same run\n");
    let _ = writeln!(
        md,
        "### Janus echotest vs voxgate passthrough + echo backend\n"
    );
    if let Some(s) = &p.skipped {
        let _ = writeln!(md, "Not measured: {s}\n");
    } else {
        janus_table(md, p);
    }
    let _ = writeln!(md, "### coturn vs the voxgate relay\n");
    let relay_us = med(&relay.relay_lat, |f| f.us_per_packet);
    let turn = med(&relay.coturn_lat, |f| f.us_per_packet);
    let _ = writeln!(
        md,
        "CPU per relayed datagram at the same packet rate ({} pps): relay {} µs, coturn {} µs{}. Flat out: relay {} µs, coturn {} µs.\n",
        thousands(Some(relay.latency_rate)),
        num(relay_us, 2),
        num(turn, 2),
        match (relay_us, turn) {
            (Some(a), Some(b)) if a > 0.0 => format!(" (coturn / relay = **{:.2} ×**)", b / a),
            _ => String::new(),
        },
        num(med(&relay.relay_max, |f| f.us_per_packet), 2),
        num(med(&relay.coturn_max, |f| f.us_per_packet), 2),
    );
}

fn janus_table(md: &mut String, p: &PeersSection) {
    let _ = writeln!(
        md,
        "{} sessions each, same load generator, same clients. Janus {} (Debian package) with only the HTTP transport and the \
         echotest plugin; ICE limited to one interface. Janus skips loopback interfaces when gathering candidates and \
         refuses to send from an address on another interface to 127.0.0.1, so both servers run inside a network namespace \
         made by `scripts/bench` and are reached over a veth pair (clients on the host side). voxgate: the transceiver in \
         the same namespace, `AUDIO_MODE_OPUS_PASSTHROUGH`, the backend echoing every Opus packet. CPU is each server \
         process's own (the echo backend of voxgate runs in the load generator, so its cost is not counted — Janus's echo is \
         in-process).\n",
        p.sessions, p.janus_version
    );
    let _ = writeln!(md, "| server | connected | cores | CPU-ms per session-s | CPU µs per packet | echoed / sent | setup DTLS p50 ms |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    for (name, runs) in [
        ("voxgate (passthrough, echo)", &p.voxgate),
        ("Janus echotest", &p.janus),
    ] {
        if runs.is_empty() {
            let _ = writeln!(md, "| {name} | failed | | | | | |");
            continue;
        }
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {} | {} | {} | {} |",
            num(med(runs, |x| x.sessions_connected_window_end as f64), 0),
            num(server(runs, |s| s.cores), 3),
            num(cpu_per_session(runs).map(|v| v * 1e3), 3),
            num(us_per_packet(runs), 2),
            num(
                med(runs, |x| x.window_audio_received as f64
                    / x.window_audio_sent.max(1) as f64),
                3
            ),
            num(med(runs, |x| x.setup.dtls_connected.p50), 2),
        );
    }
    if let (Some(v), Some(j)) = (cpu_per_session(&p.voxgate), cpu_per_session(&p.janus)) {
        if v > 0.0 {
            let _ = writeln!(
                md,
                "\nJanus / voxgate CPU per session-second: **{:.2} ×**.\n",
                j / v
            );
        }
    }
}
