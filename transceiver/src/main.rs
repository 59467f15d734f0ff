//! `transceiver` binary: parses configuration, starts the media loops and the tokio control
//! plane (signaling), and shuts everything down gracefully on SIGTERM/SIGINT.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use std::time::Duration;
use tokio::sync::mpsc;
use voxgate_transceiver::control::config::{
    BackendFlags, Config, IngressFlags, KeySource, LogFormat,
};
use voxgate_transceiver::control::plane::ControlPlane;
use voxgate_transceiver::control::process_load;

use tokio_stream::wrappers::TcpListenerStream;
use tokio_stream::StreamExt;
use voxgate_transceiver::auth::Authenticator;
use voxgate_transceiver::backend::bridge_service::{BridgeService, GrpcAdmission};
use voxgate_transceiver::backend::dispatch::Dispatcher;
use voxgate_transceiver::backend::dispatch_handle::{DispatchHandle, DispatchMsg};
use voxgate_transceiver::backend::dispatch_task::run_dispatcher;
use voxgate_transceiver::backend::write_coalescing::CoalescedWrites;
use voxgate_transceiver::control::client_origin::ProxyTrust;
use voxgate_transceiver::control::ingress::IngressSelector;
use voxgate_transceiver::control::signaling::{self, AppState};
use voxgate_transceiver::control::signaling_server;
use voxgate_transceiver::media::command::{LoopEvent, SessionEnded};
use voxgate_transceiver::media::event_loop::{self, LoopSpec};
use voxgate_transceiver::metrics::Metrics;

fn main() -> ExitCode {
    let config = Config::parse();
    init_tracing(config.logging.log_format);
    match run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("fatal: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr, like other daemons' (stdout stays free for output a tool might print),
/// filtered by `RUST_LOG` (see `log_filter`).
fn init_tracing(format: LogFormat) {
    use std::io::IsTerminal;
    let env = std::env::var("RUST_LOG").ok();
    let filter = voxgate_transceiver::log_filter::log_filter(env.as_deref());
    // Colour only on a terminal: log files and collectors get plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn run(config: Config) -> anyhow::Result<()> {
    str0m::crypto::from_feature_flags().install_process_default();
    config.check_auth()?;
    config.check_relays()?;
    let (fleet_key, key_source) = config.routing.fleet_key()?;
    // A configured fleet key is shared by the whole fleet: resume keys may derive from it.
    let shared_key = (key_source != KeySource::RandomPerProcess).then(|| fleet_key.secret());
    let authenticator = Arc::new(config.auth.authenticator(shared_key.map(|k| &k[..]))?);
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
    let ingress = config.ingress.selector()?;
    let proxy_trust = Arc::new(config.ingress.proxy_trust(ingress.as_ref()));
    log_ingress(&config.ingress, ingress.as_ref());
    let plane_config = config.control_plane(fleet_key, ingress)?;
    let metrics = Arc::new(Metrics::new());
    // Ends have their own channel (see `SessionEnded`); other events may be dropped when full.
    let (events_tx, events_rx) = mpsc::channel(config.admission.max_sessions + 1024);
    let (ended_tx, ended_rx) = mpsc::unbounded_channel();
    let cores = config.media.pin_cores();
    let loop_settings = config.loop_settings();
    let mut handles = Vec::with_capacity(loop_count);
    let mut threads = Vec::with_capacity(loop_count);
    for index in 0..loop_count {
        let bind = config.listen.loop_listen(index);
        let (handle, thread) = event_loop::spawn(LoopSpec {
            index,
            bind,
            core: (!cores.is_empty()).then(|| cores[index % cores.len()]),
            metrics: metrics.loop_metrics(index),
            events: events_tx.clone(),
            ended: ended_tx.clone(),
            tcp_bind: config.ice_tcp.loop_tcp_listen(index, bind),
            settings: loop_settings.clone(),
        })
        .with_context(|| format!("binding media loop {index} on {bind}"))?;
        handles.push(handle);
        threads.push(thread);
    }
    drop(events_tx);
    drop(ended_tx);
    let (dispatch, dispatch_rx) = DispatchHandle::channel();
    let control = Arc::new(ControlPlane::new(handles, metrics, plane_config, dispatch)?);

    // Before anything watches the process's CPU or takes a caller: the first PCM callers are
    // counted at this measured cost, and the measurement is not load (see `codec_cost`).
    control.measure_default_codec_cost();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.media.control_threads(loop_count))
        .enable_all()
        .thread_name("control")
        .on_thread_start(yield_to_media_loops)
        .build()
        .context("starting the control-plane runtime")?;
    // Signaling gets a runtime (and an OS thread) of its own. On the shared runtime an offer's
    // task queued behind the gRPC uplink: the media loop wakes one stream task per frame, and
    // after a burst of frames the wake that resumes an offer (the loop's insert reply) waited
    // behind hundreds of them, so a reply sent at once was seen long after
    // (docs/SESSION_COST.md, "Setting up a session, continued", cause 3). Its own thread is
    // scheduled by the kernel as soon as it is woken, whatever the backlog of the gRPC side.
    // Normal policy (not SCHED_BATCH): a request should preempt bulk work.
    let signaling_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .thread_name("signaling")
        .build()
        .context("starting the signaling runtime")?;
    let served = runtime.block_on(serve(
        &config,
        signaling_runtime.handle(),
        control.clone(),
        authenticator,
        proxy_trust,
        (events_rx, ended_rx),
        dispatch_rx,
    ));
    if served.is_err() {
        // serve() ends the loops on the normal path; on an error path it may not have.
        control.shutdown_loops();
    }
    for t in threads {
        let _ = t.join();
    }
    served?;
    tracing::info!("transceiver stopped");
    Ok(())
}

/// Runs signaling and the gRPC bridge until SIGTERM/SIGINT, then drains.
async fn serve(
    config: &Config,
    signaling_runtime: &tokio::runtime::Handle,
    control: Arc<ControlPlane>,
    auth: Arc<Authenticator>,
    proxy_trust: Arc<ProxyTrust>,
    (events_rx, ended_rx): (
        mpsc::Receiver<LoopEvent>,
        mpsc::UnboundedReceiver<SessionEnded>,
    ),
    dispatch_rx: mpsc::Receiver<DispatchMsg>,
) -> anyhow::Result<()> {
    tokio::spawn(control.clone().run_events(events_rx, ended_rx));
    tokio::spawn(run_dispatcher(
        Dispatcher::new(config.backend.dispatch_config()),
        dispatch_rx,
        control.clone(),
    ));
    // Registered with the signaling runtime's reactor below: a tokio listener belongs to the
    // runtime it was made in.
    let listen = &config.listen;
    let http = std::net::TcpListener::bind(listen.signal_listen)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .with_context(|| format!("binding signaling on {}", listen.signal_listen))?;
    let grpc = tokio::net::TcpListener::bind(listen.grpc_listen)
        .await
        .with_context(|| format!("binding gRPC on {}", listen.grpc_listen))?;
    tracing::info!(
        signal = %http.local_addr()?,
        grpc = %grpc.local_addr()?,
        loops = control.loops().len(),
        control_threads = config.media.control_threads(control.loops().len()),
        media = %listen.media_listen,
        "transceiver ready"
    );
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let grpc_admission = config.grpc_admission()?;
    let grpc_auth = grpc_admission.credential.is_some();
    if auth.is_open() || !grpc_auth {
        tracing::warn!(
            signaling_auth = !auth.is_open(),
            grpc_auth,
            "running without authentication on some listener (loopback or --insecure-no-auth)"
        );
    }
    if grpc_auth && config.auth.grpc_token.is_none() {
        tracing::info!("no --grpc-token: gRPC calls need the signaling --token");
    }
    let state = AppState {
        control: control.clone(),
        auth,
        body_timeout: config.signaling.body_timeout(),
        max_body_bytes: config.signaling.max_body_bytes,
        public_url: listen.public_url_base(),
        proxy_trust,
        resume_ttl: Duration::from_secs(config.auth.resume_ttl_secs),
    };
    let app = signaling::router(state);
    let (header_timeout, metrics, http_stop) = (
        config.signaling.header_timeout(),
        control.metrics.clone(),
        stop_rx.clone(),
    );
    let http = {
        let _in_signaling = signaling_runtime.enter();
        tokio::net::TcpListener::from_std(http).context("registering the signaling listener")?
    };
    // On the signaling runtime, not the gRPC one: what it measures is the gRPC side running
    // short of CPU, and it must go on sampling then.
    let cores = process_load::usable_cores();
    control.metrics.usable_cores(cores);
    tracing::info!(
        usable_cores = cores,
        max_process_cpu = config.admission.max_process_cpu,
        "admission watches the process's CPU"
    );
    let (sampled, calibrated) = (control.clone(), control.clone());
    let sampler = signaling_runtime.spawn(process_load::run_sampler(
        control.process_load(),
        cores,
        control.metrics.clone(),
        move || calibrated.calibration_cpu(),
        move |now| sampled.sample_talking(now),
    ));
    let http_task = signaling_runtime.spawn(signaling_server::serve(
        http,
        app,
        header_timeout,
        metrics,
        http_stop,
    ));
    let grpc_task = tokio::spawn(serve_grpc(
        grpc,
        control.clone(),
        grpc_admission,
        &config.backend,
        stop_rx.clone(),
    ));

    wait_for_signal().await;
    control
        .drain(config.sessions.drain_timeout(), wait_for_signal())
        .await;
    tracing::info!(
        sessions = control.session_count(),
        "shutting down: ending remaining sessions"
    );
    // Loops end their sessions cleanly (DTLS close_notify, RTCP BYE) before they exit, which
    // ends every Session stream; worker subscriptions get UNAVAILABLE.
    control.shutdown_loops();
    control.dispatch().send(DispatchMsg::Shutdown).await;
    let _ = stop_tx.send(true);
    http_task.await.context("signaling task")?;
    sampler.abort();
    // Backend subscriptions (Work streams) stay open until backends hang up; don't wait long.
    if let Ok(r) = tokio::time::timeout(Duration::from_secs(2), grpc_task).await {
        r.context("gRPC task")?.context("gRPC server failed")?;
    }
    Ok(())
}

/// The gRPC bridge on `listener` (admitting calls and workers by `admission`) until `stop`
/// turns true.
fn serve_grpc(
    listener: tokio::net::TcpListener,
    control: Arc<ControlPlane>,
    admission: GrpcAdmission,
    backend: &BackendFlags,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> impl std::future::Future<Output = Result<(), tonic::transport::Error>> {
    // tonic cannot set socket options on a listener it did not bind: do it per connection.
    // TCP_NODELAY, or Nagle holds back the small, frequent uplink frames; TCP keepalive, so a
    // peer that vanished without a FIN is noticed by the kernel even when HTTP/2 has nothing
    // in flight.
    let (keepalive, keepalive_timeout) = backend.grpc_keepalive();
    let tcp_keepalive = socket2::TcpKeepalive::new()
        .with_time(keepalive)
        .with_interval(keepalive)
        .with_retries(3);
    let coalesce = backend.grpc_write_coalescing;
    let incoming = TcpListenerStream::new(listener).map(move |conn| {
        conn.map(|c| {
            let _ = c.set_nodelay(true);
            let _ = socket2::SockRef::from(&c).set_tcp_keepalive(&tcp_keepalive);
            // With --grpc-write-coalescing, one write per runtime tick per connection instead
            // of one per frame (see `write_coalescing`).
            CoalescedWrites::new(c, coalesce)
        })
    });
    tonic::transport::Server::builder()
        // An unanswered PING closes the connection: every stream on it ends, so a frozen
        // backend's Work subscription is dropped and its sessions are dispatched again.
        .http2_keepalive_interval(Some(keepalive))
        .http2_keepalive_timeout(Some(keepalive_timeout))
        .add_service(BridgeService::server(control, admission))
        .serve_with_incoming_shutdown(incoming, async move {
            let _ = stop.changed().await;
        })
}

/// One line at start-up on how answers pick their relay addresses.
fn log_ingress(config: &IngressFlags, ingress: Option<&IngressSelector>) {
    let Some(s) = ingress else {
        tracing::info!(
            "no relay ingress configured: answers advertise each media loop's own socket"
        );
        return;
    };
    let names: Vec<&str> = s.ingresses().iter().map(|i| &*i.name).collect();
    tracing::info!(
        ingresses = ?names,
        default = %s.default_ingress().name,
        header = ?s.header().map(|h| h.as_str()),
        cidr_rules = config.ingress_cidrs.len(),
        trusted_proxies = config.trusted_proxies.len(),
        "relay ingress steering configured"
    );
    if s.header().is_some() && config.trusted_proxies.is_empty() {
        tracing::warn!(
            "--ingress-header is set but --trusted-proxies is empty: the header is never believed"
        );
    }
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

/// Control-plane threads share cores with the media loops. Under the default policy a woken
/// tokio worker (one per uplink frame handed over) preempts the loop that woke it, in the
/// middle of its batch: a context switch per frame. `SCHED_BATCH` keeps the ordinary time
/// share but gives up wakeup preemption, so tokio runs when the loop goes back to `poll`, and
/// takes the frames of the whole batch in one go. Lowering one's own policy needs no privilege.
fn yield_to_media_loops() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: plain syscall on the calling thread with a valid, initialised parameter.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
    if rc != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "SCHED_BATCH not applied");
    }
}
