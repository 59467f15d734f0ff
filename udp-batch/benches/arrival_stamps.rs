//! What the kernel's receive stamps cost the reader: one `recvmmsg` of 32 loopback datagrams
//! (RTP-sized, 160 bytes) with and without `SO_TIMESTAMPNS` and a control buffer per slot. Only
//! the receiving thread's CPU time is measured (the send and the kernel's enqueue, where the
//! stamp is taken, run in the sender's system call). Criterion's time is per batch of 32.
//!
//! `cargo bench -p voxgate-udp-batch --bench arrival_stamps`

use std::net::UdpSocket;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use voxgate_udp_batch::{stamp_arrivals, RecvBatch, SendBatch};

const BATCH: usize = 32;

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into a valid, writable one.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn receive(c: &mut Criterion) {
    let mut g = c.benchmark_group("recvmmsg_32");
    g.throughput(Throughput::Elements(BATCH as u64));
    for stamped in [false, true] {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        if stamped {
            stamp_arrivals(&rx).unwrap();
        }
        let to = rx.local_addr().unwrap();
        let mut out = SendBatch::new(BATCH, 256, false);
        let mut batch = if stamped {
            RecvBatch::with_arrival_times(BATCH, 2048)
        } else {
            RecvBatch::new(BATCH, 2048)
        };
        let payload = [0x80u8; 160];
        let name = if stamped { "stamped" } else { "plain" };
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut cpu = Duration::ZERO;
                for _ in 0..iters {
                    for _ in 0..BATCH {
                        out.push(to, &[], &payload, 0).unwrap();
                    }
                    out.flush(&tx, |_, _| {});
                    let before = thread_cpu();
                    let n = batch.recv(&rx).unwrap();
                    let stamps = batch.iter().filter(|r| r.arrived.is_some()).count();
                    cpu += thread_cpu() - before;
                    assert_eq!(n, BATCH, "a whole batch queued");
                    assert_eq!(stamps, if stamped { BATCH } else { 0 });
                }
                cpu
            })
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = receive
}
criterion_main!(benches);
