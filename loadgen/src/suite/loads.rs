//! The loads the scenarios share: the suite's session load against a transceiver, its
//! built-in backend, and a flow run of the plan's size.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use voxgate_proto::bridge::AudioMode;

use crate::backend::{BackendConfig, Behaviour};
use crate::relay_load::{self, FlowResult, FlowTarget, FlowsArgs};
use crate::session_load::{LoadConfig, Target};
use crate::suite::args::Profile;
use crate::suite::runner::{Ledger, Runner};
use crate::suite::servers::Transceiver;

/// The datagram size of every flow run, in bytes (an Opus voice packet in SRTP).
pub const FLOW_SIZE: usize = 120;

impl<R: Ledger> Runner<'_, R> {
    /// The suite's session load against transceiver `t`: audio on, the plan's window and
    /// uplink loss, no backend (the scenario adds the one it needs).
    pub fn load_config(&self, t: &Transceiver, sessions: usize, rate: f64) -> LoadConfig {
        LoadConfig {
            target: Target::Voxgate {
                url: t.signal.clone(),
                token: None,
            },
            sessions,
            rate,
            hold: Duration::from_secs_f64(self.plan.hold_secs),
            settle: Duration::from_secs_f64(if self.args.profile == Profile::Smoke {
                0.2
            } else {
                1.0
            }),
            connect_timeout: Duration::from_secs(10),
            audio: true,
            data_channel: false,
            uplink_loss: self.plan.uplink_loss,
            seed: self.seed(),
            signaling_threads: 4,
            server_pid: Some(t.proc.pid()),
            backend: None,
            progress: true,
            bind_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            teardown: false,
            metrics_url: None,
            window_hooks: Default::default(),
        }
    }

    /// The built-in backend of transceiver `t`, with room for every session.
    pub fn backend(
        &self,
        t: &Transceiver,
        sessions: usize,
        mode: AudioMode,
        behaviour: Behaviour,
    ) -> BackendConfig {
        BackendConfig {
            url: t.grpc.clone(),
            worker_id: format!("bench-{}", self.run_no()),
            capacity: (sessions as u32 * 2).max(4),
            mode,
            behaviour,
            sample_rate: 48_000,
            // One stream for every session, as the SDK does (the cost scenario also measures a
            // stream per session: `-sessions` modes).
            multiplex: true,
        }
    }

    /// The backend's downlink duty cycle: 1 s of audio every 2 s.
    pub fn duty() -> Behaviour {
        Behaviour::Duty {
            on: Duration::from_secs(1),
            period: Duration::from_secs(2),
            random_gaps: false,
        }
    }

    /// One flow run of the plan's size through `target`.
    pub fn flows(
        &self,
        target: FlowTarget,
        to: Option<SocketAddr>,
        sink: SocketAddr,
        rate: f64,
        pid: Option<u32>,
        key: Option<&str>,
    ) -> anyhow::Result<FlowResult> {
        relay_load::run(&FlowsArgs {
            target,
            to,
            sink,
            fleet_key: key.map(str::to_string),
            fleet_key_id: 1,
            flows: self.plan.relay_flows,
            rate,
            secs: self.plan.relay_secs,
            size: FLOW_SIZE,
            server_pid: pid,
            cpu: Some(1),
            out: None,
        })
    }
}
