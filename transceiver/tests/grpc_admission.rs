//! Who may use the gRPC bridge, against the real transceiver: whenever signaling needs a
//! credential, so does every gRPC call (a worker receives every dispatch, a tap hears any
//! call: on a shared host an open gRPC port beside a guarded signaling port was a way around
//! it), and worker registrations are capped per connection and in total. Refusals are
//! counted.

mod support;

use std::process::Command;
use std::time::Duration;

use support::{
    http_get, metric_sum, run_with_timeout, transceiver_bin, wait_metric, ServerProcess,
};
use tonic::transport::Channel;
use voxgate_proto::bridge::bridge_client::BridgeClient;
use voxgate_proto::bridge::{worker_message, Register, TapRequest, WorkerCommand, WorkerMessage};

const SESSION: &str = "0123456789abcdef0123456789abcdef";

fn with_token<T>(message: T, token: Option<&str>) -> tonic::Request<T> {
    let mut req = tonic::Request::new(message);
    if let Some(t) = token {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    req
}

async fn connect(server: &ServerProcess) -> BridgeClient<Channel> {
    BridgeClient::connect(server.grpc_url.clone())
        .await
        .expect("the gRPC port")
}

/// A tap of an unknown session: NOT_FOUND once past the credential check.
async fn tap_code(client: &mut BridgeClient<Channel>, token: Option<&str>) -> tonic::Code {
    let req = TapRequest {
        session_id: SESSION.into(),
        sample_rate_hz: 0,
        ..Default::default()
    };
    match client.tap(with_token(req, token)).await {
        Ok(_) => panic!("a tap of an unknown session must fail"),
        Err(status) => status.code(),
    }
}

/// An open `Work` stream: dropping it closes the worker's side, as a backend that goes.
#[derive(Debug)]
struct Registered {
    _up: tokio::sync::mpsc::Sender<WorkerMessage>,
    _down: tonic::Streaming<WorkerCommand>,
}

/// Registers `worker` on `client`'s connection; the open `Work` stream, or its status.
async fn register(
    client: &mut BridgeClient<Channel>,
    worker: &str,
    token: Option<&str>,
) -> Result<Registered, tonic::Status> {
    let first = WorkerMessage {
        kind: Some(worker_message::Kind::Register(Register {
            worker_id: worker.into(),
            capacity: 4,
        })),
    };
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(first).await.unwrap();
    let outbound = tokio_stream::wrappers::ReceiverStream::new(rx);
    let down = client.work(with_token(outbound, token)).await?.into_inner();
    Ok(Registered {
        _up: tx,
        _down: down,
    })
}

fn rejected(server: &ServerProcess, reason: &str) -> u64 {
    let text = http_get(&server.url("/metrics"), None).body;
    metric_sum(
        &text,
        "voxgate_grpc_rejected_total",
        &[&format!("reason=\"{reason}\"")],
    )
}

#[test]
fn with_a_signaling_token_workers_and_taps_need_a_credential_too() {
    // Issue 37: with --token and no --grpc-token (the default on loopback), any local process
    // could register as a worker, receive every dispatch and tap any call.
    let server = ServerProcess::start(&["--loops", "1", "--token", "s3cret"]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _work = rt.block_on(async {
        let mut client = connect(&server).await;
        let refused = register(&mut client, "intruder", None).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::Unauthenticated);
        assert_eq!(
            tap_code(&mut client, None).await,
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            tap_code(&mut client, Some("guess")).await,
            tonic::Code::Unauthenticated
        );
        // The operator's static token is the credential gRPC takes when it has none of its own.
        assert_eq!(
            tap_code(&mut client, Some("s3cret")).await,
            tonic::Code::NotFound
        );
        register(&mut client, "backend", Some("s3cret"))
            .await
            .expect("a backend with the token registers")
    });
    assert_eq!(rejected(&server, "auth_missing"), 2);
    assert_eq!(rejected(&server, "auth_invalid"), 1);
    assert_eq!(wait_metric(&server, "voxgate_backend_workers", &[], 1), 1);
}

#[test]
fn a_grpc_token_of_its_own_is_the_only_credential_grpc_takes() {
    let server = ServerProcess::start(&["--loops", "1", "--token", "signal", "--grpc-token", "g"]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut client = connect(&server).await;
        assert_eq!(
            tap_code(&mut client, Some("signal")).await,
            tonic::Code::Unauthenticated,
            "the signaling token is not a gRPC credential beside --grpc-token"
        );
        assert_eq!(
            tap_code(&mut client, Some("g")).await,
            tonic::Code::NotFound
        );
    });
}

#[test]
fn loopback_without_any_auth_stays_open() {
    let server = ServerProcess::start(&["--loops", "1"]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut client = connect(&server).await;
        assert_eq!(tap_code(&mut client, None).await, tonic::Code::NotFound);
        let _work = register(&mut client, "local", None).await.unwrap();
    });
}

#[test]
fn per_call_tokens_without_a_grpc_credential_refuse_to_start_naming_grpc_token() {
    let key = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("grpc-admission-{}.key", std::process::id()));
    std::fs::write(&key, [b'k'; 40]).unwrap();
    let mut cmd = Command::new(transceiver_bin());
    cmd.args([
        "--signal-listen",
        "127.0.0.1:0",
        "--media-listen",
        "127.0.0.1:0",
        "--grpc-listen",
        "127.0.0.1:0",
        "--token-key-file",
        key.to_str().unwrap(),
    ])
    .env("NO_COLOR", "1");
    let out = run_with_timeout(&mut cmd, Duration::from_secs(20));
    assert!(
        !out.timed_out && out.status.is_some_and(|s| !s.success()),
        "expected a start-up error\n{}",
        out.describe()
    );
    let log = format!("{}{}", out.stdout, out.stderr);
    assert!(
        log.contains("--token-key-file") && log.contains("set --grpc-token"),
        "{log}"
    );
}

#[test]
fn worker_registrations_are_capped_per_connection_and_in_total() {
    let server = ServerProcess::start(&[
        "--loops",
        "1",
        "--max-workers-per-connection",
        "2",
        "--max-workers",
        "3",
    ]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let url = server.grpc_url.clone();
        let mut one = BridgeClient::connect(url.clone()).await.unwrap();
        let mut two = BridgeClient::connect(url).await.unwrap();
        let w1 = register(&mut one, "w1", None).await.unwrap();
        let _w2 = register(&mut one, "w2", None).await.unwrap();
        let refused = register(&mut one, "w3", None).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(
            refused.message().contains("--max-workers-per-connection"),
            "{refused:?}"
        );
        // Another connection has room; the transceiver has one more.
        let _w4 = register(&mut two, "w4", None).await.unwrap();
        let refused = register(&mut two, "w5", None).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(refused.message().contains("--max-workers"), "{refused:?}");
        // A worker that goes gives its registration back.
        drop(w1);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            match register(&mut two, "w5", None).await {
                Ok(_w5) => break,
                Err(s) if s.code() == tonic::Code::ResourceExhausted => {
                    assert!(std::time::Instant::now() < deadline, "still refused: {s:?}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(s) => panic!("{s:?}"),
            }
        }
    });
    assert_eq!(rejected(&server, "workers_per_connection"), 1);
    assert!(rejected(&server, "workers_total") >= 1);
}
