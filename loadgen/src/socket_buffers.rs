//! Socket buffer sizes for the load generator's own sockets and the bare forwarder.

use std::os::fd::AsFd;

/// Asks for `bytes` of receive and of send buffer. The kernel caps both at `rmem_max` /
/// `wmem_max` (nothing is forced past the caps, so the figure does not depend on running as
/// root); a refusal leaves the default size, which the load still runs with.
pub fn set_buffers(socket: impl AsFd, bytes: usize) {
    let bytes = bytes.min(i32::MAX as usize);
    let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&socket, bytes);
    let _ = rustix::net::sockopt::set_socket_send_buffer_size(&socket, bytes);
}
