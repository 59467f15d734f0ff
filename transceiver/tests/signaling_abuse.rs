//! A hostile caller with nothing but a valid call of its own, against the signaling edge of the
//! real transceiver process (issue 37, items 4, 5 and 6): SDP bombs and ICE-restart floods,
//! a per-call token used on another caller's session or for many sessions, and metadata that
//! pretends to be signed, overflows its bound or carries control characters. Each test makes
//! the attack happen, then checks what the attacker got, what its neighbours kept and what the
//! operator sees counted.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use support::backend::TestWorker;
use support::probe::{a_new_caller_connects, gap_stats, playing_neighbour, rss_kib};
use support::{
    client_from, http_client, http_delete, http_get, http_post_sdp, metric_sum, metrics,
    HttpResponse, ServerProcess, AUDIO_OFFER,
};

fn rejected(text: &str, reason: &str) -> u64 {
    metric_sum(
        text,
        "voxgate_signaling_rejected_total",
        &[&format!("reason=\"{reason}\"")],
    )
}

/// An offer of as many small `m=audio` sections as fit in `max_bytes`, all in one BUNDLE
/// group with the ICE credentials and fingerprint at session level (so str0m accepts it as
/// it stands); returns it and the count.
fn audio_section_bomb(max_bytes: usize) -> (String, usize) {
    let session = |mids: &str| {
        format!(
            "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE{mids}\r\n\
             a=ice-ufrag:Kx9f\r\na=ice-pwd:Nw5Yb2XzT0t1QZ0ScmTn3aJ8\r\n\
             a=fingerprint:sha-256 6B:8B:5D:EA:59:04:20:23:29:C8:87:1C:CC:87:32:BE:DD:8C:66:A5:\
             8E:50:55:EA:8C:D3:B6:5C:09:5E:D6:BC\r\na=setup:actpass\r\n"
        )
    };
    let section = |i: usize| {
        format!(
            "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=mid:{i}\r\n\
             a=sendrecv\r\na=rtcp-mux\r\na=rtpmap:111 opus/48000/2\r\n"
        )
    };
    let (mut mids, mut sections, mut n) = (String::new(), String::new(), 0);
    loop {
        let more_mids = format!("{mids} {n}");
        let more_sections = sections.clone() + &section(n);
        if session(&more_mids).len() + more_sections.len() > max_bytes {
            return (session(&mids) + &sections, n);
        }
        (mids, sections, n) = (more_mids, more_sections, n + 1);
    }
}

/// The plain audio offer with `n` more `a=ssrc` lines, each for a stream of its own.
fn ssrc_bomb(n: usize) -> String {
    let mut sdp = AUDIO_OFFER.to_string();
    for i in 0..n {
        sdp.push_str(&format!("a=ssrc:{} cname:x{i}\r\n", 2_000_000 + i));
    }
    sdp
}

fn post_from(client: &reqwest::blocking::Client, url: &str, sdp: &str) -> (u16, String) {
    let r = client
        .post(url)
        .header("Content-Type", "application/sdp")
        .body(sdp.to_string())
        .send()
        .unwrap();
    (r.status().as_u16(), r.text().unwrap_or_default())
}

/// POSTs the plain audio offer from `client`; returns the new session's `Location`.
fn created_by(client: &reqwest::blocking::Client, url: &str) -> String {
    let r = client
        .post(url)
        .header("Content-Type", "application/sdp")
        .body(AUDIO_OFFER)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    r.headers()["location"].to_str().unwrap().to_string()
}

fn patch_sdp(
    client: &reqwest::blocking::Client,
    url: &str,
    sdp: &str,
    token: Option<&str>,
) -> HttpResponse {
    let mut rb = client
        .patch(url)
        .header("Content-Type", "application/sdp")
        .body(sdp.to_string());
    if let Some(t) = token {
        rb = rb.bearer_auth(t);
    }
    let r = rb.send().unwrap();
    HttpResponse {
        status: r.status().as_u16(),
        headers: r.headers().clone(),
        body: r.text().unwrap_or_default(),
    }
}

#[test]
fn sdp_bombs_are_refused_before_any_session_exists_and_the_neighbour_keeps_its_pace() {
    let server = ServerProcess::start(&["--loops", "1", "--no-pin"]);
    let worker = TestWorker::start(&server.grpc_url, "w1", 4, 48_000);
    // The neighbour: a caller the backend plays a long reply to.
    let (mut neighbour, id) = playing_neighbour(&server, &worker);
    neighbour.drive_for(Duration::from_millis(500));

    // Within the default limits: 100 POSTs from each of two addresses, one sending offers of
    // hundreds of audio sections, the other offers of a thousand a=ssrc lines.
    let url = server.url("/v1/sessions");
    let (sections, n_sections) = audio_section_bomb(64 * 1024 - 512);
    let ssrcs = ssrc_bomb(1_000);
    assert!(n_sections >= 100 && ssrcs.len() < 64 * 1024);
    const BOMBS: usize = 100;
    let rss_before = rss_kib(server.pid());
    let frames_before = worker.session(&id).unwrap().frames.len();
    let arrivals_before = neighbour.rtp_arrivals.len();
    let wall = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let attack_start = wall();
    let started = Instant::now();
    let (by_sections, by_ssrcs) = std::thread::scope(|s| {
        let a = s.spawn(|| {
            let c = client_from("127.0.0.2");
            (0..BOMBS)
                .map(|_| post_from(&c, &url, &sections))
                .collect::<Vec<_>>()
        });
        let b = s.spawn(|| {
            let c = client_from("127.0.0.3");
            (0..BOMBS)
                .map(|_| post_from(&c, &url, &ssrcs))
                .collect::<Vec<_>>()
        });
        // Measure the neighbour for at least 4 s, and for as long as the attack lasts.
        neighbour.drive_for(Duration::from_secs(4));
        while !(a.is_finished() && b.is_finished()) {
            neighbour.drive_for(Duration::from_millis(100));
        }
        (a.join().unwrap(), b.join().unwrap())
    });
    let attack_end = wall();
    let attack = started.elapsed();
    neighbour.drive_for(Duration::from_millis(300));
    let rss_after = rss_kib(server.pid());
    let frames = worker.session(&id).unwrap().frames.len() - frames_before;
    let gaps: Vec<f64> = neighbour.rtp_arrivals[arrivals_before..]
        .windows(2)
        .filter(|w| w[1] >= attack_start + Duration::from_millis(100) && w[1] < attack_end)
        .map(|w| w[1].saturating_sub(w[0]).as_secs_f64() * 1000.0)
        .collect();
    let heard = gaps.len();
    let (median, p99, max) = gap_stats(gaps);
    let text = metrics(&server);
    let created = metric_sum(&text, "voxgate_sessions_created_total", &[]);
    eprintln!(
        "SDP bombs: {BOMBS} offers of {n_sections} audio sections and {BOMBS} of 1000 a=ssrc \
         lines in {attack:?}; statuses {:?} / {:?}; sessions created {created}; RSS \
         {rss_before} -> {rss_after} KiB; neighbour: {frames} uplink frames, {heard} downlink \
         packets, gaps median {median:.1} ms, p99 {p99:.1} ms, max {max:.1} ms",
        by_sections.first(),
        by_ssrcs.first()
    );
    // Each bomb is refused with a 400 that names the bound it broke.
    let want = format!("offer has {n_sections} audio sections; voxgate serves one");
    for (status, body) in &by_sections {
        assert_eq!(*status, 400, "{body}");
        assert!(body.contains(&want), "{body}");
    }
    for (status, body) in &by_ssrcs {
        assert_eq!(*status, 400, "{body}");
        assert!(body.contains("a=ssrc"), "{body}");
    }
    // Before any session state: only the neighbour's session was ever created.
    assert_eq!(created, 1, "{text}");
    // The attacker's effort is counted.
    assert_eq!(rejected(&text, "offer_sections"), BOMBS as u64);
    assert_eq!(rejected(&text, "offer_ssrcs"), BOMBS as u64);
    // Memory stays put (accepted, each bomb cost megabytes).
    assert!(
        rss_after <= rss_before + 8 * 1024,
        "RSS grew from {rss_before} to {rss_after} KiB"
    );
    // The neighbour keeps its pace both ways: 20 ms frames for as long as it was measured.
    let expected = (attack.as_secs_f64().max(4.0) * 50.0) as usize;
    assert!(
        frames * 10 >= expected * 9,
        "the backend got {frames} of ~{expected} uplink frames"
    );
    assert!(
        heard * 10 >= expected * 9 - 100,
        "the neighbour heard {heard} of ~{expected} downlink packets"
    );
    assert!(
        max <= 100.0,
        "a downlink gap of {max:.1} ms (p99 {p99:.1} ms)"
    );
    // New callers are admitted at once.
    a_new_caller_connects(&server);
}

#[test]
fn ice_restarts_are_rate_limited_per_session_and_per_ip() {
    // The address's bucket made small, so a dozen sessions exhaust it.
    let server = ServerProcess::start(&[
        "--loops",
        "1",
        "--restart-rate-per-ip",
        "1",
        "--restart-burst-per-ip",
        "10",
    ]);
    let url = server.url("/v1/sessions");
    let attacker = client_from("127.0.0.2");
    let mut sessions = Vec::new();
    for _ in 0..12 {
        sessions.push(server.url(&created_by(&attacker, &url)));
    }
    // A bomb by PATCH is refused like one by POST.
    let (bomb, n) = audio_section_bomb(32 * 1024);
    let r = patch_sdp(&attacker, &sessions[0], &bomb, None);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains(&format!("offer has {n} audio sections")));
    // One session: a few restarts pass (409 here: it never connected), then 429.
    let statuses: Vec<HttpResponse> = (0..6)
        .map(|_| patch_sdp(&attacker, &sessions[1], AUDIO_OFFER, None))
        .collect();
    let limited: Vec<&HttpResponse> = statuses.iter().filter(|r| r.status == 429).collect();
    assert!(
        statuses[..2].iter().all(|r| r.status == 409),
        "{:?}",
        statuses.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert!(limited.len() >= 2, "{} limited", limited.len());
    let retry: u64 = limited[0].header("retry-after").unwrap().parse().unwrap();
    assert!(retry >= 1, "Retry-After {retry}");
    // Many sessions of one address: each within its own bucket, the address runs out.
    let mut by_ip = 0;
    for s in &sessions[2..] {
        for _ in 0..2 {
            if patch_sdp(&attacker, s, AUDIO_OFFER, None).status == 429 {
                by_ip += 1;
            }
        }
    }
    assert!(by_ip >= 5, "{by_ip} of 20 refused for the address");
    // Another address is not affected.
    let other = client_from("127.0.0.3");
    let theirs = server.url(&created_by(&other, &url));
    assert_eq!(patch_sdp(&other, &theirs, AUDIO_OFFER, None).status, 409);
    let text = metrics(&server);
    let counted = rejected(&text, "restarts_per_session") + rejected(&text, "restarts_per_ip");
    assert_eq!(counted, limited.len() as u64 + by_ip, "{text}");
    assert!(rejected(&text, "restarts_per_ip") >= by_ip);
    assert_eq!(rejected(&text, "offer_sections"), 1);
}

// ---- per-call tokens -------------------------------------------------------------------------

const SECRET: &str = "0123456789abcdef0123456789abcdef-abuse-test-key";

/// A per-call token with `payload` as its JSON, minted as docs/operating.md's snippet does.
fn mint(payload: serde_json::Value) -> String {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    use hmac::Mac;
    let p = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&payload).unwrap());
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(b"v1.");
    mac.update(p.as_bytes());
    format!(
        "v1.{p}.{}",
        URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    )
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn token_server(extra: &[&str]) -> (ServerProcess, std::path::PathBuf) {
    let key_path = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "abuse-{}-{}.key",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::write(&key_path, format!("{SECRET}\n")).unwrap();
    let mut args = vec![
        "--loops",
        "1",
        "--token",
        "operator-token",
        "--token-key-file",
        key_path.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    (ServerProcess::start(&args), key_path)
}

fn rand_suffix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64
}

#[test]
fn a_per_call_token_controls_only_its_own_session_once_and_not_forever() {
    let (server, key_path) = token_server(&[]);
    let url = server.url("/v1/sessions");
    let now = now_secs();
    let alice = mint(serde_json::json!({"exp": now + 60, "jti": "a1", "meta": {"user": "alice"}}));
    let mallory = mint(serde_json::json!({"exp": now + 60, "jti": "m1", "meta": {"user": "m"}}));
    let r = http_post_sdp(&url, AUDIO_OFFER, Some(&alice));
    assert_eq!(r.status, 201, "{}", r.body);
    let alices = server.url(&r.header("location").unwrap());
    let r = http_post_sdp(&url, AUDIO_OFFER, Some(&mallory));
    assert_eq!(r.status, 201, "{}", r.body);
    let mallorys = server.url(&r.header("location").unwrap());

    // Mallory's valid token gets nothing of Alice's session: no data, no way to tell it
    // from a session that does not exist, no restart, no hang-up.
    let unknown = server.url("/v1/sessions/0123456789abcdef0123456789abcdef");
    let probe = http_get(&unknown, Some(&mallory));
    let got = http_get(&alices, Some(&mallory));
    assert_eq!(got.status, 404, "{}", got.body);
    assert_eq!(got.body, probe.body);
    assert!(!got.body.contains("client_addrs"));
    let r = patch_sdp(&http_client(), &alices, AUDIO_OFFER, Some(&mallory));
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(http_delete(&alices, Some(&mallory)).status, 404);
    // Alice's own token, and the operator's, still see it alive.
    let mine = http_get(&alices, Some(&alice));
    assert_eq!(mine.status, 200, "{}", mine.body);
    assert!(mine.body.contains("client_addrs"));
    assert_eq!(http_get(&alices, Some("operator-token")).status, 200);

    // Single use: the token that made a session makes no second one.
    let again = http_post_sdp(&url, AUDIO_OFFER, Some(&alice));
    assert_eq!(again.status, 401, "{}", again.body);
    // ... unless the minter said how many: three, then no more.
    let family = mint(serde_json::json!({"exp": now + 60, "jti": "f", "uses": 3}));
    let statuses: Vec<u16> = (0..4)
        .map(|_| http_post_sdp(&url, AUDIO_OFFER, Some(&family)).status)
        .collect();
    assert_eq!(statuses, [201, 201, 201, 401]);
    // A token that never expires, or lives past the longest lifetime, is refused.
    for exp in [u64::MAX, now + 25 * 3600] {
        let forever = mint(serde_json::json!({"exp": exp, "jti": format!("x{exp}")}));
        let r = http_post_sdp(&url, AUDIO_OFFER, Some(&forever));
        assert_eq!(r.status, 401, "exp {exp}: {}", r.body);
    }
    let long = mint(serde_json::json!({"exp": now + 23 * 3600, "jti": "long"}));
    assert_eq!(http_post_sdp(&url, AUDIO_OFFER, Some(&long)).status, 201);

    // The owners hang up their own calls; the operator's token may hang up any.
    assert_eq!(http_delete(&alices, Some(&alice)).status, 204);
    assert_eq!(http_delete(&mallorys, Some("operator-token")).status, 204);
    let text = metrics(&server);
    assert_eq!(rejected(&text, "token_reused"), 2, "{text}");
    assert_eq!(rejected(&text, "token_lifetime"), 2, "{text}");
    // Mallory's three tries and its probe of an unknown id, counted alike (no oracle there).
    assert_eq!(rejected(&text, "session_not_found"), 4, "{text}");
    let _ = std::fs::remove_file(key_path);
}

// ---- metadata --------------------------------------------------------------------------------

/// A worker that records every dispatch it is offered (and attaches none).
struct DispatchRecorder {
    dispatches: Arc<Mutex<Vec<voxgate_proto::bridge::Dispatch>>>,
    _runtime: tokio::runtime::Runtime,
}

impl DispatchRecorder {
    fn start(url: &str) -> DispatchRecorder {
        use tokio_stream::StreamExt;
        use voxgate_proto::bridge::bridge_client::BridgeClient;
        use voxgate_proto::bridge::{worker_command, worker_message, Register, WorkerMessage};
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let dispatches = Arc::new(Mutex::new(Vec::new()));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let sink = Arc::clone(&dispatches);
        let credential = support::grpc_credential(url);
        let url = url.to_string();
        runtime.spawn(async move {
            let mut client = loop {
                match BridgeClient::connect(url.clone()).await {
                    Ok(c) => break c,
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            };
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            let register = worker_message::Kind::Register(Register {
                worker_id: "recorder".into(),
                capacity: 1000,
            });
            tx.send(WorkerMessage {
                kind: Some(register),
            })
            .await
            .unwrap();
            let mut request = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
            // The server's signaling token guards its gRPC too (it has no --grpc-token).
            if let Some(token) = &credential {
                let bearer = format!("Bearer {token}").parse().unwrap();
                request.metadata_mut().insert("authorization", bearer);
            }
            let mut commands = client.work(request).await.unwrap().into_inner();
            let _ = ready_tx.send(());
            while let Some(Ok(cmd)) = commands.next().await {
                if let Some(worker_command::Kind::Dispatch(d)) = cmd.kind {
                    sink.lock().unwrap().push(d);
                }
            }
            drop(tx);
        });
        ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        DispatchRecorder {
            dispatches,
            _runtime: runtime,
        }
    }

    fn first_for(&self, session: &str) -> voxgate_proto::bridge::Dispatch {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(d) = self
                .dispatches
                .lock()
                .unwrap()
                .iter()
                .find(|d| d.session_id == session)
            {
                return d.clone();
            }
            assert!(Instant::now() < deadline, "{session} was not dispatched");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn session_id(r: &HttpResponse) -> String {
    let location = r.header("location").expect("Location");
    location.rsplit('/').next().unwrap().to_string()
}

#[test]
fn signed_and_caller_metadata_stay_apart_bounded_and_free_of_control_characters() {
    let (server, key_path) = token_server(&["--post-rate-per-ip", "0"]);
    let recorder = DispatchRecorder::start(&server.grpc_url);
    let url = server.url("/v1/sessions");
    let now = now_secs();
    let post = |query: &str, headers: &[(&str, &str)], token: &str| {
        let mut rb = http_client()
            .post(format!("{url}{query}"))
            .header("Content-Type", "application/sdp")
            .bearer_auth(token)
            .body(AUDIO_OFFER);
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        let r = rb.send().unwrap();
        HttpResponse {
            status: r.status().as_u16(),
            headers: r.headers().clone(),
            body: r.text().unwrap_or_default(),
        }
    };
    let mut jti = 0;
    let mut token = |meta: serde_json::Value| {
        jti += 1;
        mint(serde_json::json!({"exp": now + 60, "jti": jti.to_string(), "meta": meta}))
    };

    // The caller claims to be an admin where the token says nothing of it.
    let r = post(
        "?user=admin&room=blue",
        &[("X-Voxgate-Lang", "en")],
        &token(serde_json::json!({"plan": "pro", "room": "signed-room"})),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let d = recorder.first_for(&session_id(&r));
    assert_eq!(
        d.signed_metadata,
        map(&[("plan", "pro"), ("room", "signed-room")])
    );
    assert_eq!(
        d.caller_metadata,
        map(&[("user", "admin"), ("room", "blue"), ("lang", "en")])
    );
    // The old merged map, for old backends: the signed value wins a shared key.
    assert_eq!(
        d.metadata,
        map(&[
            ("plan", "pro"),
            ("room", "signed-room"),
            ("user", "admin"),
            ("lang", "en")
        ])
    );

    // 32 entries in all: a full token leaves the caller no room ...
    let full: serde_json::Map<String, serde_json::Value> =
        (0..32).map(|i| (format!("t{i}"), "v".into())).collect();
    let query: String = (0..16).map(|i| format!("&q{i}=v")).collect();
    let headers: Vec<(String, String)> = (0..16)
        .map(|i| (format!("x-voxgate-h{i}"), "v".to_string()))
        .collect();
    let header_refs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let r = post(
        &format!("?{}", &query[1..]),
        &header_refs,
        &token(serde_json::Value::Object(full.clone())),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("32"), "{}", r.body);
    let r = post("?q=v", &[], &token(serde_json::Value::Object(full.clone())));
    assert_eq!(r.status, 400, "{}", r.body);
    // ... and a token of 20 leaves 12.
    let twenty: serde_json::Map<String, serde_json::Value> =
        (0..20).map(|i| (format!("t{i}"), "v".into())).collect();
    let twelve: String = (0..12).map(|i| format!("&q{i}=v")).collect();
    let r = post(
        &format!("?{}", &twelve[1..]),
        &[],
        &token(serde_json::Value::Object(twenty.clone())),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let d = recorder.first_for(&session_id(&r));
    assert_eq!(
        (
            d.signed_metadata.len(),
            d.caller_metadata.len(),
            d.metadata.len()
        ),
        (20, 12, 32)
    );
    let r = post(
        &format!("?{}&q12=v", &twelve[1..]),
        &[],
        &token(serde_json::Value::Object(twenty)),
    );
    assert_eq!(r.status, 400, "{}", r.body);

    // Control and format characters never reach the backend: CR LF, NUL, a bidi override,
    // a zero-width space, DEL, in values and in keys; the 400 names the key.
    for (query, key) in [
        ("?note=a%0d%0aX-Admin:%20yes", "note"),
        ("?note=a%00b", "note"),
        ("?name=%E2%80%AEtxt.exe", "name"),
        ("?name=a%E2%80%8Bb", "name"),
        ("?name=a%7Fb", "name"),
        ("?bad%0akey=v", "bad"),
    ] {
        let r = post(query, &[], &token(serde_json::json!({})));
        assert_eq!(r.status, 400, "{query}: {}", r.body);
        assert!(r.body.contains(key), "{query}: {}", r.body);
    }
    let r = post(
        "",
        &[("X-Voxgate-Note", "a\tb")],
        &token(serde_json::json!({})),
    );
    assert_eq!(r.status, 400, "tab in a header: {}", r.body);
    // A signed value is held to the same characters (the application's mistake, not the
    // caller's: 401 like any other bad token).
    let r = post("", &[], &token(serde_json::json!({"note": "a\r\nb"})));
    assert_eq!(r.status, 401, "{}", r.body);
    // Text that is merely not ASCII is fine.
    let r = post(
        "?name=J%C3%BCrgen%20%E6%9D%B1%E4%BA%AC",
        &[],
        &token(serde_json::json!({})),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let d = recorder.first_for(&session_id(&r));
    assert_eq!(d.caller_metadata["name"], "Jürgen 東京");

    let text = metrics(&server);
    assert_eq!(rejected(&text, "metadata_bounds"), 3, "{text}");
    assert_eq!(rejected(&text, "metadata_characters"), 7, "{text}");
    let _ = std::fs::remove_file(key_path);
}
