//! Harness for voxgate's deployment tests: several "hosts" made of Linux network namespaces on
//! one machine, the workspace's real binaries running inside them, and the text those binaries
//! print (`--help`, Prometheus metrics) read back.
//!
//! How the pieces fit:
//!
//! ```text
//!  Network::create(hosts)          one namespace per host + one "net" namespace holding a bridge;
//!     │                            a veth pair per host (eth0 in the host, v-<host> on the bridge).
//!     │                            Nothing is created in the caller's namespace.
//!     ├─ spawn(host, Command) ──►  Proc: a child whose network namespace is the host's (setns in
//!     │                            the child before exec), output to a log file, SIGTERM/SIGKILL
//!     │                            on drop.
//!     ├─ enter(host)          ──►  moves the *calling thread* into the host (setns): sockets it
//!     │                            opens, and threads it spawns, live there.
//!     └─ Drop                 ──►  kills what still runs in the namespaces, deletes them.
//!  binaries::path("relay")         the workspace binary, built once per test process.
//! ```
//!
//! For the dashboards test: [`prometheus`] runs a real Prometheus server scraping the binaries,
//! [`promql`] pulls every query out of deploy/'s dashboard and alerting rules.
//!
//! Namespace names start with [`netns::PREFIX`]; a run first removes leftovers of a crashed
//! run (and the processes inside them), under an exclusive lock so two runs never share names.

pub mod binaries;
pub mod fleet_key;
pub mod metrics_text;
pub mod netns;
pub mod process;
pub mod prometheus;
pub mod promql;

pub use netns::{Network, NetworkError};
pub use process::Proc;
