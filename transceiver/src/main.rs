//! `transceiver` binary: parses configuration, starts the media loops and the tokio control
//! plane (signaling), and shuts everything down gracefully on SIGTERM/SIGINT.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use tokio::sync::mpsc;
use voxgate_transceiver::config::{Config, KeySource, LogFormat};
use voxgate_transceiver::control::{ControlPlane, ControlPlaneConfig};
use voxgate_transceiver::media_loop::{self, LoopSpec};
use voxgate_transceiver::metrics::Metrics;
use voxgate_transceiver::signaling::{self, AppState};

fn main() -> ExitCode {
    let config = Config::parse();
    init_tracing(config.log_format);
    match run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("fatal: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn run(config: Config) -> anyhow::Result<()> {
    str0m::crypto::from_feature_flags().install_process_default();
    let (fleet_key, key_source) = config.fleet_key()?;
    match key_source {
        KeySource::RandomPerProcess => tracing::info!(
            "no fleet key configured: using a random key for this process \
             (fine without a relay; relays could not decode this process's hints)"
        ),
        KeySource::Flag | KeySource::File => {
            tracing::info!(key_id = fleet_key.id(), "fleet key loaded")
        }
    }
    let loop_count = config.loop_count()?;
    let internal_ip = config.internal_ip()?;
    let metrics = Arc::new(Metrics::new());
    // Each session ends once, so this capacity means loops never lose an end event.
    let (events_tx, events_rx) = mpsc::channel(config.max_sessions + 1024);
    let cores = if config.no_pin {
        Vec::new()
    } else {
        core_affinity::get_core_ids().unwrap_or_default()
    };
    let mut handles = Vec::with_capacity(loop_count);
    let mut threads = Vec::with_capacity(loop_count);
    for index in 0..loop_count {
        let bind = config.loop_listen(index);
        let (handle, thread) = media_loop::spawn(LoopSpec {
            index,
            bind,
            core: (!cores.is_empty()).then(|| cores[index % cores.len()]),
            metrics: metrics.loop_metrics(index),
            events: events_tx.clone(),
        })
        .with_context(|| format!("binding media loop {index} on {bind}"))?;
        handles.push(handle);
        threads.push(thread);
    }
    drop(events_tx);
    let control = Arc::new(ControlPlane::new(
        handles,
        metrics,
        ControlPlaneConfig {
            fleet_key,
            cluster_id: config.cluster_id,
            internal_ip,
            advertise: config.advertise.clone(),
            connect_timeout: config.connect_timeout(),
            max_sessions: config.max_sessions,
        },
    )?);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("control")
        .build()
        .context("starting the control-plane runtime")?;
    let served = runtime.block_on(async {
        tokio::spawn(control.clone().run_events(events_rx));
        let listener = tokio::net::TcpListener::bind(config.signal_listen)
            .await
            .with_context(|| format!("binding signaling on {}", config.signal_listen))?;
        tracing::info!(
            signal = %listener.local_addr()?,
            loops = loop_count,
            media = %config.media_listen,
            "transceiver ready"
        );
        let state = AppState {
            control: control.clone(),
            token: config.token.as_deref().map(Arc::from),
        };
        let app = signaling::router(state, config.max_body_bytes);
        let shutdown_control = control.clone();
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                wait_for_signal().await;
                tracing::info!("shutting down: no new sessions, ending existing ones");
                shutdown_control.start_draining();
            })
            .await
            .context("signaling server failed")?;
        anyhow::Ok(())
    });
    // Loops end their sessions cleanly (DTLS close_notify, RTCP BYE) before they exit.
    control.shutdown_loops();
    for t in threads {
        let _ = t.join();
    }
    served?;
    tracing::info!("transceiver stopped");
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the server");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
