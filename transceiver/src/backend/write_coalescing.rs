//! A gRPC connection's writes, coalesced to one system call per runtime tick.
//!
//! Each session's uplink is its own HTTP/2 stream, and every frame the media loop hands to a
//! stream wakes that stream's task, which hands one DATA frame to the connection task, which
//! tokio then runs at once (its LIFO slot) and which writes and flushes the socket. So a loop
//! pass that produced frames for ten sessions made ten `writev`s on the same connection:
//! 5,000 a second at 100 passthrough sessions, one per uplink frame, each paying the system
//! call, a TCP segment and, on loopback, the receiver's wakeup (`writev` stood out in a perf
//! profile of the transceiver).
//!
//! [`CoalescedWrites`] sits between hyper and the TCP stream. It takes writes into a buffer
//! and answers a flush by deferring it to the end of the runtime's current tick: tokio wakes
//! deferred tasks once its run queue is drained (or every 61 task polls under load,
//! `event_interval`), so every stream task the same wakeup made ready has added its frame by
//! then, and they leave in one `write`. A frame waits at most that tick, never a timer
//! (Nagle's algorithm stays off: see `main.rs`). Past [`WRITE_THROUGH_BYTES`] buffered, writes
//! go to the socket at once, and a socket that does not take them pushes back as before.
//!
//! Opt-in (`--grpc-write-coalescing`). It cuts `write`s from one per frame to one per tick,
//! but no CPU saving showed in a later A/B, and it lengthened the setup tail at 100 arrivals/s
//! while signaling still shared the gRPC runtime (docs/SESSION_COST.md, "Coalescing: fewer
//! wakeups and system calls per packet" and "Setting up a session, continued").
//!
//! The deferral uses only tokio's public API: `tokio::task::yield_now` registers a waker with
//! the scheduler's defer list; ours records that it fired before waking the connection task.

use std::future::Future;
use std::io;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Buffered bytes past which a write goes to the socket without waiting for the flush: a
/// tick's worth of frames for hundreds of sessions (a 48 kHz PCM frame is 1.9 KB), small
/// enough that one connection cannot hold much memory.
pub const WRITE_THROUGH_BYTES: usize = 64 * 1024;

/// An I/O stream whose flushes wait for the end of the runtime tick (see the module doc).
pub struct CoalescedWrites<T> {
    inner: T,
    /// Off (the default, see `--grpc-write-coalescing`): every call goes straight to `inner`.
    enabled: bool,
    /// Bytes taken from the writer and not yet written; `buf[written..]` is still owed.
    buf: Vec<u8>,
    written: usize,
    /// A flush is waiting for the end of the tick.
    armed: bool,
    tick_end: Arc<TickEnd>,
}

/// The waker handed to tokio's defer list: notes that the tick ended, then wakes the task
/// that asked to flush.
#[derive(Default)]
struct TickEnd {
    fired: AtomicBool,
    task: Mutex<Option<Waker>>,
}

impl Wake for TickEnd {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.fired.store(true, Ordering::Release);
        let task = self.task.lock().map(|mut t| t.take()).unwrap_or(None);
        if let Some(task) = task {
            task.wake();
        }
    }
}

impl<T> CoalescedWrites<T> {
    /// `enabled` false passes every write and flush straight through (for comparisons).
    pub fn new(inner: T, enabled: bool) -> Self {
        CoalescedWrites {
            inner,
            enabled,
            buf: Vec::new(),
            written: 0,
            armed: false,
            tick_end: Arc::default(),
        }
    }

    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    fn owed(&self) -> usize {
        self.buf.len() - self.written
    }

    /// Asks to be woken once the current tick's other tasks have run. Returns whether that
    /// already happened.
    fn tick_ended(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.armed {
            self.armed = true;
            self.tick_end.fired.store(false, Ordering::Release);
            if let Ok(mut t) = self.tick_end.task.lock() {
                *t = Some(cx.waker().clone());
            }
            // The first poll of `yield_now` puts our waker on the scheduler's defer list (or,
            // outside a runtime, wakes it at once); the future itself is not needed after.
            let waker = Waker::from(self.tick_end.clone());
            let _ = pin!(tokio::task::yield_now()).poll(&mut Context::from_waker(&waker));
            return false;
        }
        if let Ok(mut t) = self.tick_end.task.lock() {
            match t.as_ref() {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => *t = Some(cx.waker().clone()),
            }
        }
        // Checked after the waker is stored, so a tick that ends in between still wakes us.
        self.tick_end.fired.load(Ordering::Acquire)
    }
}

impl<T: AsyncWrite + Unpin> CoalescedWrites<T> {
    /// Writes everything owed to the socket.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.buf.len() {
            let n = std::task::ready!(
                Pin::new(&mut self.inner).poll_write(cx, &self.buf[self.written..])
            )?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.buf.clear();
        self.written = 0;
        Poll::Ready(Ok(()))
    }

    /// Room for `want` more bytes, writing through to the socket when the buffer is full.
    fn poll_room(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.owed() >= WRITE_THROUGH_BYTES {
            std::task::ready!(self.poll_drain(cx))?;
        }
        Poll::Ready(Ok(WRITE_THROUGH_BYTES - self.owed()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for CoalescedWrites<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if !this.enabled {
            return Pin::new(&mut this.inner).poll_write(cx, data);
        }
        let room = std::task::ready!(this.poll_room(cx))?;
        let n = data.len().min(room);
        this.buf.extend_from_slice(&data[..n]);
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if !this.enabled {
            return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        }
        let mut room = std::task::ready!(this.poll_room(cx))?;
        let mut taken = 0;
        for b in bufs {
            let n = b.len().min(room);
            this.buf.extend_from_slice(&b[..n]);
            taken += n;
            room -= n;
            if room == 0 {
                break;
            }
        }
        Poll::Ready(Ok(taken))
    }

    fn is_write_vectored(&self) -> bool {
        self.enabled || self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.owed() > 0 {
            if !this.tick_ended(cx) {
                return Poll::Pending;
            }
            std::task::ready!(this.poll_drain(cx))?;
        }
        this.armed = false;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_drain(cx))?;
        this.armed = false;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for CoalescedWrites<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: tonic::transport::server::Connected> tonic::transport::server::Connected
    for CoalescedWrites<T>
{
    type ConnectInfo = T::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A socket stand-in that records each write it was given (what would be a system call).
    #[derive(Default)]
    struct Recorder {
        writes: Vec<Vec<u8>>,
        /// Takes at most this much per write (0: everything).
        max_per_write: usize,
    }

    impl AsyncWrite for Recorder {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            data: &[u8],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            let n = match this.max_per_write {
                0 => data.len(),
                m => data.len().min(m),
            };
            this.writes.push(data[..n].to_vec());
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// Writes and flushes `frame` once per call, as hyper's connection task does per DATA
    /// frame, and reports whether the flush completed in that poll.
    fn write_and_poll_flush(io: &mut CoalescedWrites<Recorder>, frame: &[u8]) -> bool {
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(matches!(
            Pin::new(&mut *io).poll_write(&mut cx, frame),
            Poll::Ready(Ok(n)) if n == frame.len()
        ));
        Pin::new(&mut *io).poll_flush(&mut cx).is_ready()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn frames_flushed_within_one_tick_leave_in_one_write() {
        // On a worker thread, as hyper's connection task runs (the test's own body does not).
        tokio::spawn(frames_of_one_tick()).await.unwrap();
    }

    async fn frames_of_one_tick() {
        let mut io = CoalescedWrites::new(Recorder::default(), true);
        // Ten frames, each written and flushed inside one task poll (one tick).
        std::future::poll_fn(|_| {
            for k in 0..10u8 {
                assert!(
                    !write_and_poll_flush(&mut io, &[k; 100]),
                    "flush {k} waited"
                );
            }
            Poll::Ready(())
        })
        .await;
        assert!(
            io.get_ref().writes.is_empty(),
            "nothing written inside the tick"
        );
        // The tick ends once this task yields: the flush then completes.
        tokio::time::timeout(Duration::from_secs(5), io.flush())
            .await
            .expect("the deferred flush completes")
            .unwrap();
        let writes = &io.get_ref().writes;
        assert_eq!(writes.len(), 1, "one write for the tick: {writes:?}");
        let expected: Vec<u8> = (0..10u8).flat_map(|k| [k; 100]).collect();
        assert_eq!(writes[0], expected, "the frames in order");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_lone_frame_reaches_the_peer_without_waiting_for_more() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let mut got = [0u8; 5];
            s.read_exact(&mut got).await.unwrap();
            got
        });
        let (server, _) = listener.accept().await.unwrap();
        let mut io = CoalescedWrites::new(server, true);
        io.write_all(b"hello").await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), io.flush())
            .await
            .expect("the flush completes")
            .unwrap();
        let got = tokio::time::timeout(Duration::from_secs(5), client)
            .await
            .expect("the peer hears it")
            .unwrap();
        assert_eq!(&got, b"hello");
    }

    #[test]
    fn outside_a_runtime_the_flush_is_not_held() {
        // A poll made with no scheduler in context (yield_now wakes at once): the second
        // poll of the flush already writes.
        let mut io = CoalescedWrites::new(Recorder::default(), true);
        let done = std::thread::spawn(move || {
            assert!(!write_and_poll_flush(&mut io, b"abc"));
            let mut cx = Context::from_waker(Waker::noop());
            assert!(Pin::new(&mut io).poll_flush(&mut cx).is_ready());
            io.get_ref().writes.clone()
        })
        .join()
        .unwrap();
        assert_eq!(done, vec![b"abc".to_vec()]);
    }

    #[test]
    fn turned_off_every_write_goes_straight_to_the_socket() {
        let mut io = CoalescedWrites::new(Recorder::default(), false);
        assert!(write_and_poll_flush(&mut io, b"one"));
        assert!(write_and_poll_flush(&mut io, b"two"));
        assert_eq!(io.get_ref().writes, vec![b"one".to_vec(), b"two".to_vec()]);
    }

    #[test]
    fn a_full_buffer_writes_through_before_taking_more() {
        let mut io = CoalescedWrites::new(Recorder::default(), true);
        let mut cx = Context::from_waker(Waker::noop());
        let chunk = vec![7u8; 16 * 1024];
        let mut taken = 0;
        for _ in 0..5 {
            match Pin::new(&mut io).poll_write(&mut cx, &chunk) {
                Poll::Ready(Ok(n)) => taken += n,
                other => panic!("write refused: {other:?}"),
            }
        }
        assert_eq!(taken, 5 * chunk.len());
        let writes = &io.get_ref().writes;
        assert_eq!(
            writes.len(),
            1,
            "the first 64 KiB went out when the buffer filled"
        );
        assert_eq!(writes[0].len(), WRITE_THROUGH_BYTES);
        assert_eq!(io.owed(), chunk.len(), "the rest waits for the flush");
    }

    #[test]
    fn a_socket_taking_part_of_a_write_gets_the_rest_later_in_order() {
        let mut io = CoalescedWrites::new(
            Recorder {
                max_per_write: 1000,
                ..Recorder::default()
            },
            true,
        );
        let mut cx = Context::from_waker(Waker::noop());
        let data: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
        assert!(matches!(
            Pin::new(&mut io).poll_write(&mut cx, &data),
            Poll::Ready(Ok(2500))
        ));
        assert!(Pin::new(&mut io).poll_shutdown(&mut cx).is_ready());
        let sent: Vec<u8> = io.get_ref().writes.concat();
        assert_eq!(io.get_ref().writes.len(), 3);
        assert_eq!(sent, data);
    }
}
