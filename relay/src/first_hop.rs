//! The first-packet decision shared by both transports: may this STUN binding request open a
//! flow (UDP) or a connection (TCP), and to which next hop? Sans-IO: the keyring and limits
//! come from [`RoutingConfig`], time comes in as `now` plus a [`WallClock`] the caller sets.
//!
//! A request opens something only if its USERNAME's server ufrag is an authentic routing
//! hint, not too old nor from the future (see the flow table's *Hint age*), and names either
//! a loop of our cluster inside `--transceivers` or a cluster with a configured peer relay.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use voxgate_proto::{decode_timed, server_ufrag, MintTime, RoutingHint};

use crate::config::RoutingConfig;
use crate::drop_reason::DropReason;

/// Clock difference tolerated between the transceiver that minted a hint and this relay,
/// either way (it also covers the mint time's rounding down to the minute).
pub const HINT_CLOCK_SKEW: Duration = Duration::from_secs(300);

/// The relay's wall clock as an input: `(instant, seconds since the Unix epoch)` at the last
/// [`WallClock::set`], extrapolated with `now`. Unset, every hint is judged expired (there is
/// nothing to judge its age by).
#[derive(Debug, Clone, Copy, Default)]
pub struct WallClock(Option<(Instant, Duration)>);

impl WallClock {
    /// The wall clock reads `since_epoch` at `now`.
    pub fn set(&mut self, now: Instant, since_epoch: Duration) {
        self.0 = Some((now, since_epoch));
    }

    /// [`set`](Self::set) from a `SystemTime`; a time before the epoch counts as the epoch.
    pub fn set_from(&mut self, now: Instant, wall: SystemTime) {
        self.set(now, wall.duration_since(UNIX_EPOCH).unwrap_or_default());
    }

    fn at(&self, now: Instant) -> Option<Duration> {
        self.0
            .map(|(at, wall)| wall + now.saturating_duration_since(at))
    }
}

/// The authenticated hint in a STUN binding request, if it may open a flow now: it decodes
/// under the keyring and its age is acceptable.
pub fn routable_hint(
    cfg: &RoutingConfig,
    clock: &WallClock,
    now: Instant,
    stun: &[u8],
) -> Result<RoutingHint, DropReason> {
    let ufrag = server_ufrag(stun).map_err(|_| DropReason::BadStun)?;
    let hint = decode_timed(&cfg.keyring, ufrag).map_err(|_| DropReason::BadHint)?;
    match hint.minted {
        Some(minted) => check_age(cfg, clock, now, minted)?,
        None if cfg.accept_untimed_hints => {}
        None => return Err(DropReason::HintUntimed),
    }
    Ok(hint.route)
}

/// Where a client's first STUN binding request goes: the loop its hint names (our cluster,
/// inside `--transceivers`) or the peer relay of the hint's cluster.
pub fn first_hop(
    cfg: &RoutingConfig,
    clock: &WallClock,
    now: Instant,
    stun: &[u8],
) -> Result<SocketAddr, DropReason> {
    let hint = routable_hint(cfg, clock, now, stun)?;
    if hint.cluster_id == cfg.cluster_id {
        if !cfg.is_transceiver(hint.loop_addr.ip()) {
            return Err(DropReason::HintDestination);
        }
        Ok(hint.loop_addr)
    } else {
        cfg.peer_for(hint.cluster_id)
            .ok_or(DropReason::UnknownCluster)
    }
}

fn check_age(
    cfg: &RoutingConfig,
    clock: &WallClock,
    now: Instant,
    minted: MintTime,
) -> Result<(), DropReason> {
    let Some(wall) = clock.at(now) else {
        return Err(DropReason::HintExpired);
    };
    let minted = Duration::from_secs(minted.unix_secs());
    if minted > wall + HINT_CLOCK_SKEW {
        return Err(DropReason::HintFromFuture);
    }
    if wall.saturating_sub(minted) > cfg.hint_max_age.saturating_add(HINT_CLOCK_SKEW) {
        return Err(DropReason::HintExpired);
    }
    Ok(())
}
