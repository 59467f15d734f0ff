//! Micro-benchmarks of the per-packet parsers on the relay's and transceiver's hot paths:
//! reading a STUN USERNAME in place, decoding a routing hint, encoding and decoding the
//! relay header, and the transceiver's demux lookups (ufrag map and address map at 1,000
//! sessions). `scripts/bench` runs them with short measurement times and copies the
//! estimates into docs/BENCHMARKS.md.

use std::collections::HashMap;
use std::hint::black_box;
use std::net::SocketAddr;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use voxgate_loadgen::stun_probe::binding_request;
use voxgate_proto::{
    decode, mint, server_ufrag, Direction, FleetKey, Keyring, MintTime, RelayHeader, RoutingHint,
};

fn key() -> FleetKey {
    FleetKey::new(1, [0x42; 32])
}

fn minted() -> MintTime {
    MintTime::from_unix_secs(1_704_067_200)
}

fn hint_v4() -> RoutingHint {
    RoutingHint {
        cluster_id: 3,
        loop_addr: "10.0.0.5:40001".parse().unwrap(),
    }
}

fn hint_v6() -> RoutingHint {
    RoutingHint {
        cluster_id: 3,
        loop_addr: "[2001:db8::5]:40001".parse().unwrap(),
    }
}

fn stun_username(c: &mut Criterion) {
    let ufrag = mint(&key(), &hint_v4(), minted(), [9; 12]);
    let msg = binding_request(format!("{ufrag}:Xy12").as_bytes(), [1; 12]);
    c.bench_function("stun_username/server_ufrag", |b| {
        b.iter(|| server_ufrag(black_box(&msg)).map(|u| u.len()))
    });
}

fn hint(c: &mut Criterion) {
    let ring = Keyring::new(key());
    let v4 = mint(&key(), &hint_v4(), minted(), [9; 12]);
    let v6 = mint(&key(), &hint_v6(), minted(), [9; 12]);
    let mut forged = v4.clone().into_bytes();
    forged[30] = if forged[30] == b'A' { b'B' } else { b'A' };
    c.bench_function("hint/decode_v4", |b| {
        b.iter(|| decode(&ring, black_box(v4.as_bytes())))
    });
    c.bench_function("hint/decode_v6", |b| {
        b.iter(|| decode(&ring, black_box(v6.as_bytes())))
    });
    c.bench_function("hint/decode_forged", |b| {
        b.iter(|| decode(&ring, black_box(&forged)))
    });
    c.bench_function("hint/mint_v4", |b| {
        b.iter(|| mint(&key(), black_box(&hint_v4()), minted(), [9; 12]))
    });
}

fn header(c: &mut Criterion) {
    let h4 = RelayHeader::udp(
        Direction::ToTransceiver,
        "198.51.100.7:5000".parse().unwrap(),
    );
    let h6 = RelayHeader::udp(Direction::ToClient, "[2001:db8::7]:5000".parse().unwrap());
    let mut buf = [0u8; 1500];
    c.bench_function("relay_header/encode_v4", |b| {
        b.iter(|| black_box(&h4).encode(black_box(&mut buf)))
    });
    c.bench_function("relay_header/encode_v6", |b| {
        b.iter(|| black_box(&h6).encode(black_box(&mut buf)))
    });
    let mut framed4 = [0u8; 128];
    h4.encode(&mut framed4).unwrap();
    let mut framed6 = [0u8; 128];
    h6.encode(&mut framed6).unwrap();
    c.bench_function("relay_header/decode_v4", |b| {
        b.iter(|| RelayHeader::decode(black_box(&framed4)).map(|(h, p)| (h.client, p.len())))
    });
    c.bench_function("relay_header/decode_v6", |b| {
        b.iter(|| RelayHeader::decode(black_box(&framed6)).map(|(h, p)| (h.client, p.len())))
    });
}

/// The transceiver's demux maps (`transceiver/src/media/demux.rs`) at 1,000 sessions on a loop.
fn demux(c: &mut Criterion) {
    let mut by_ufrag: HashMap<Box<[u8]>, usize> = HashMap::new();
    let mut by_addr: HashMap<SocketAddr, usize> = HashMap::new();
    let mut ufrags = Vec::new();
    for i in 0..1000u32 {
        let mut nonce = [0u8; 12];
        nonce[..4].copy_from_slice(&i.to_be_bytes());
        let u = mint(&key(), &hint_v4(), minted(), nonce);
        by_ufrag.insert(u.as_bytes().into(), i as usize);
        ufrags.push(u);
        let addr = SocketAddr::from(([127, 0, 0, 1], 20_000 + i as u16));
        by_addr.insert(addr, i as usize);
    }
    let msg = binding_request(format!("{}:Xy12", ufrags[517]).as_bytes(), [1; 12]);
    let addr = SocketAddr::from(([127, 0, 0, 1], 20_517));
    c.bench_function("demux/ufrag_lookup_1000", |b| {
        b.iter(|| by_ufrag.get(black_box(ufrags[517].as_bytes())).copied())
    });
    c.bench_function("demux/stun_username_then_ufrag_lookup_1000", |b| {
        b.iter(|| {
            server_ufrag(black_box(&msg))
                .ok()
                .and_then(|u| by_ufrag.get(u).copied())
        })
    });
    c.bench_function("demux/addr_lookup_1000", |b| {
        b.iter(|| by_addr.get(black_box(&addr)).copied())
    });
}

fn config() -> Criterion {
    // Short by default (the machine is shared); scripts/bench --full passes longer times.
    let secs = |var: &str, default: f64| {
        std::env::var(var)
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(default)
    };
    Criterion::default()
        .warm_up_time(Duration::from_secs_f64(secs(
            "LOADGEN_BENCH_WARMUP_SECS",
            0.5,
        )))
        .measurement_time(Duration::from_secs_f64(secs(
            "LOADGEN_BENCH_MEASURE_SECS",
            1.5,
        )))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = stun_username, hint, header, demux
}
criterion_main!(benches);
