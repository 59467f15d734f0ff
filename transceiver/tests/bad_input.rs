//! Bad input against the real transceiver process: every signaling error status, and floods of
//! garbage and forged STUN on a media socket. Nothing may panic, create state, or answer.

mod support;

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use support::{
    binding_request, http_client, http_delete, http_get, http_post_sdp, metric_sum, ServerProcess,
    AUDIO_OFFER,
};

fn metrics(server: &ServerProcess) -> String {
    let r = http_get(&server.url("/metrics"), None);
    assert_eq!(r.status, 200);
    r.body
}

fn wait_for_metric(server: &ServerProcess, name: &str, labels: &[&str], want: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = metrics(server);
        if metric_sum(&text, name, labels) >= want || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sends datagrams paced so the kernel's socket buffer never overflows (the point is the
/// server's accounting, not the kernel's).
fn send_paced(sock: &UdpSocket, to: SocketAddr, datagrams: impl Iterator<Item = Vec<u8>>) -> u64 {
    let mut n = 0u64;
    for d in datagrams {
        sock.send_to(&d, to).expect("send");
        n += 1;
        if n.is_multiple_of(200) {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    n
}

fn assert_nothing_answered(sock: &UdpSocket) {
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 2048];
    match sock.recv_from(&mut buf) {
        Ok((n, from)) => panic!("server answered {n} bytes from {from}"),
        Err(e) => assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "{e}"
        ),
    }
}

#[test]
fn signaling_errors_have_precise_statuses() {
    let server = ServerProcess::start(&["--loops", "1", "--max-sessions", "1"]);
    let url = server.url("/v1/sessions");

    let r = http_post_sdp(&url, "this is not sdp", None);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("malformed SDP"), "{}", r.body);

    let video_only = AUDIO_OFFER
        .replace(
            "m=audio 9 UDP/TLS/RTP/SAVPF 111",
            "m=video 9 UDP/TLS/RTP/SAVPF 96",
        )
        .replace("a=rtpmap:111 opus/48000/2", "a=rtpmap:96 VP8/90000");
    let r = http_post_sdp(&url, &video_only, None);
    assert_eq!(r.status, 400);
    assert!(r.body.contains("no m=audio"), "{}", r.body);

    let r = http_client()
        .post(&url)
        .header("Content-Type", "text/plain")
        .body(AUDIO_OFFER)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);

    let huge = format!(
        "{AUDIO_OFFER}{}",
        "a=x-padding:0123456789\r\n".repeat(40_000)
    );
    let r = http_post_sdp(&url, &huge, None);
    assert_eq!(r.status, 413, "a 1 MB body must be refused");

    let unknown = server.url("/v1/sessions/0123456789abcdef0123456789abcdef");
    assert_eq!(http_get(&unknown, None).status, 404);
    assert_eq!(http_delete(&unknown, None).status, 404);
    assert_eq!(
        http_get(&server.url("/v1/sessions/not-an-id"), None).status,
        404
    );

    // Capacity: the first offer takes the only slot, the second is refused with Retry-After.
    let first = http_post_sdp(&url, AUDIO_OFFER, None);
    assert_eq!(first.status, 201, "{}", first.body);
    let location = first.header("location").expect("Location header");
    assert!(location.starts_with("/v1/sessions/"));
    assert!(first.body.contains("a=ice-lite"), "answer must be ICE-lite");
    let second = http_post_sdp(&url, AUDIO_OFFER, None);
    assert_eq!(second.status, 503);
    assert_eq!(second.header("retry-after").as_deref(), Some("1"));

    // Deleting frees the slot.
    assert_eq!(http_delete(&server.url(&location), None).status, 204);
    assert_eq!(http_get(&server.url(&location), None).status, 404);
    let third = http_post_sdp(&url, AUDIO_OFFER, None);
    assert_eq!(third.status, 201, "{}", third.body);

    let text = metrics(&server);
    assert_eq!(
        metric_sum(
            &text,
            "voxgate_signaling_responses_total",
            &["status=\"400\""]
        ),
        2
    );
    assert_eq!(
        metric_sum(
            &text,
            "voxgate_signaling_responses_total",
            &["status=\"503\""]
        ),
        1
    );
}

#[test]
fn token_is_required_when_configured() {
    let server = ServerProcess::start(&["--loops", "1", "--token", "s3cret"]);
    let url = server.url("/v1/sessions");
    let r = http_post_sdp(&url, AUDIO_OFFER, None);
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate").as_deref(), Some("Bearer"));
    assert_eq!(http_post_sdp(&url, AUDIO_OFFER, Some("wrong")).status, 401);
    let ok = http_post_sdp(&url, AUDIO_OFFER, Some("s3cret"));
    assert_eq!(ok.status, 201, "{}", ok.body);
    // Operational endpoints stay open for probes and scrapers.
    assert_eq!(http_get(&server.url("/healthz"), None).status, 200);
    assert_eq!(http_get(&server.url("/metrics"), None).status, 200);
    // So is the browser client library a page loads before it has a token.
    let js = http_get(&server.url("/voxgate.js"), None);
    assert_eq!(js.status, 200);
    assert_eq!(
        js.header("content-type").as_deref(),
        Some("text/javascript; charset=utf-8")
    );
    assert!(js.body.contains("export"), "an ES module: {:.200}", js.body);
    assert_eq!(
        js.body,
        std::fs::read_to_string(support::repo_root().join("clients/web/dist/voxgate.js")).unwrap(),
        "the served file is the committed build"
    );
}

#[test]
fn garbage_datagrams_are_dropped_and_counted_without_reply() {
    let server = ServerProcess::start(&["--loops", "1"]);
    let media: SocketAddr = ([127, 0, 0, 1], server.media_base_port).into();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        // xorshift64*: deterministic garbage without a dependency.
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        seed.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let garbage = (0..10_000).map(|_| {
        let len = 1 + (next() % 1200) as usize;
        (0..len).map(|_| next() as u8).collect::<Vec<u8>>()
    });
    let sent = send_paced(&sock, media, garbage);
    assert_eq!(sent, 10_000);
    let text = wait_for_metric(&server, "voxgate_datagrams_in_total", &[], sent);
    assert_eq!(metric_sum(&text, "voxgate_datagrams_in_total", &[]), sent);
    assert_eq!(
        metric_sum(&text, "voxgate_dropped_datagrams_total", &[]),
        sent,
        "every garbage datagram is dropped and counted:\n{text}"
    );
    assert_eq!(metric_sum(&text, "voxgate_datagrams_out_total", &[]), 0);
    assert_eq!(metric_sum(&text, "voxgate_sessions_active", &[]), 0);
    assert_nothing_answered(&sock);
}

#[test]
fn forged_ufrags_create_no_state_and_get_no_answer() {
    let server = ServerProcess::start(&["--loops", "1"]);
    let url = server.url("/v1/sessions");
    let created = http_post_sdp(&url, AUDIO_OFFER, None);
    assert_eq!(created.status, 201);
    let location = created.header("location").unwrap();
    let real_ufrag = created
        .body
        .lines()
        .find_map(|l| l.strip_prefix("a=ice-ufrag:"))
        .expect("answer has a ufrag")
        .trim()
        .to_string();

    let media: SocketAddr = ([127, 0, 0, 1], server.media_base_port).into();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    // Forged: same length and alphabet as a minted ufrag, one character changed or random.
    let forged = (0..10_000u32).map(|i| {
        let mut u: Vec<u8> = real_ufrag.bytes().collect();
        let pos = (i as usize) % u.len();
        u[pos] = if u[pos] == b'A' { b'B' } else { b'A' };
        if i % 2 == 0 {
            u.rotate_left(1 + (i as usize % 7));
        }
        let ufrag = String::from_utf8(u).unwrap();
        binding_request(&ufrag, i)
    });
    let sent = send_paced(&sock, media, forged);
    // And the real ufrag with a bad MESSAGE-INTEGRITY: reaches the session, str0m refuses it.
    let bad_integrity = binding_request(&real_ufrag, 424242);
    sock.send_to(&bad_integrity, media).unwrap();

    let text = wait_for_metric(&server, "voxgate_datagrams_in_total", &[], sent + 1);
    let unknown = metric_sum(
        &text,
        "voxgate_dropped_datagrams_total",
        &["reason=\"stun_unknown_ufrag\""],
    );
    // A forged ufrag equal to the real one is impossible here (a character always changes).
    assert_eq!(unknown, sent, "{text}");
    assert_eq!(metric_sum(&text, "voxgate_datagrams_out_total", &[]), 0);
    assert_eq!(metric_sum(&text, "voxgate_sessions_active", &[]), 1);
    assert_nothing_answered(&sock);

    let snap = http_get(&server.url(&location), None).json();
    assert_eq!(
        snap["client_addrs"].as_array().map(Vec::len),
        Some(0),
        "an unauthenticated address must not be mapped: {snap}"
    );
    assert_eq!(snap["state"], "connecting");
}

#[test]
fn public_url_makes_location_absolute() {
    let server =
        ServerProcess::start(&["--loops", "1", "--public-url", "https://tx-7.example.com/"]);
    let r = http_post_sdp(&server.url("/v1/sessions"), AUDIO_OFFER, None);
    assert_eq!(r.status, 201);
    let location = r.header("location").unwrap();
    assert!(
        location.starts_with("https://tx-7.example.com/v1/sessions/"),
        "{location}"
    );
}
