//! The routing hint: the server ICE ufrag, minted by a transceiver, decoded by any relay.
//!
//! The ufrag is public (it is in the SDP answer and in clear in every STUN check), so the
//! routing data it carries is encrypted and authenticated under a fleet key shared by relays
//! and transceivers. A relay decodes it with no lookup; a forged, corrupted or replayed-under-
//! another-key hint fails the AEAD tag and yields an error, never a route.
//!
//! # Wire format
//!
//! The ufrag is `base64(raw)` with the **standard alphabet and no padding**. That alphabet is
//! exactly the ICE character set (`A-Za-z0-9+/`, RFC 8839 `ice-char`), so the ufrag needs no
//! further escaping. Non-canonical encodings (set trailing bits) are rejected.
//!
//! `raw`, byte by byte:
//!
//! | offset | len | field |
//! |---|---|---|
//! | 0 | 1 | version: `2` (minted), or `1` (decoded only, see below) |
//! | 1 | 1 | key id of the fleet key used (in clear, for rotation) |
//! | 2 | 12 | nonce: per-session randomness supplied by the minter |
//! | 14 | 15 or 27 | ciphertext: ChaCha20-Poly1305(key, nonce, aad = `[version, key_id]`, plaintext) |
//! | 29 or 41 | 16 | Poly1305 tag |
//!
//! `plaintext`, byte by byte:
//!
//! | offset | len | field |
//! |---|---|---|
//! | 0 | 4 | cluster id, u32 big-endian |
//! | 4 | 1 | address family: `4` or `6` |
//! | 5 | 4 or 16 | IP address of the owning transceiver loop, network order |
//! | 9 or 21 | 2 | UDP port of that loop, u16 big-endian |
//! | 11 or 23 | 4 | mint time: whole minutes since the Unix epoch (UTC), u32 big-endian |
//!
//! So `raw` is 45 bytes for IPv4 (ufrag: 60 chars) and 57 bytes for IPv6 (ufrag: 76 chars).
//! The family byte must agree with the length. IPv6 flow info and scope id are not carried
//! (they decode as 0). The length reveals the address family, nothing else: the mint time is
//! encrypted like the address, so the ufrag does not tell an observer when it was minted.
//!
//! The mint time is coarse (minutes) on purpose: it only has to let relays stop routing old
//! ufrags (`--hint-max-age-secs`, hours), and a u32 of minutes lasts for 8,000 years.
//!
//! ## Version 1
//!
//! Version 1 is version 2 without the mint time: plaintext of 11 or 23 bytes, `raw` of 41 or
//! 53 bytes (ufrag: 55 or 71 chars), version byte `1`. This crate never mints it but still
//! decodes it ([`decode_timed`] reports no mint time), so relays can be upgraded before the
//! transceivers that mint; whether an untimed hint may route is the relay's policy. Versions
//! and lengths never overlap, and the version byte is authenticated (it is in the AAD), so a
//! version 2 hint cannot be passed off as version 1 by stripping its mint time.
//!
//! The nonce must not repeat under one key: callers draw it from a CSPRNG per mint (96 random
//! bits make a collision negligible at any realistic session count).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD_NO_PAD;
use base64::{DecodeError, DecodeSliceError, Engine as _};
use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce, Tag};

/// Length of the per-session nonce carried in clear in the hint.
pub const NONCE_LEN: usize = 12;

/// Upper bound of a minted ufrag's length (the IPv6 form).
pub const MAX_UFRAG_LEN: usize = UFRAG_V6_LEN;

/// The hint version this crate mints: carries a mint time.
const VERSION: u8 = 2;
/// The legacy version without a mint time: decoded, never minted.
const VERSION_UNTIMED: u8 = 1;
const PREFIX_LEN: usize = 2 + NONCE_LEN;
const TAG_LEN: usize = 16;
const MINT_TIME_LEN: usize = 4;
const ROUTE_V4_LEN: usize = 4 + 1 + 4 + 2;
const ROUTE_V6_LEN: usize = 4 + 1 + 16 + 2;
const PLAINTEXT_MAX_LEN: usize = ROUTE_V6_LEN + MINT_TIME_LEN;
const RAW_V4_LEN: usize = PREFIX_LEN + ROUTE_V4_LEN + MINT_TIME_LEN + TAG_LEN;
const RAW_V6_LEN: usize = PREFIX_LEN + ROUTE_V6_LEN + MINT_TIME_LEN + TAG_LEN;
const RAW_UNTIMED_V4_LEN: usize = PREFIX_LEN + ROUTE_V4_LEN + TAG_LEN;
const RAW_UNTIMED_V6_LEN: usize = PREFIX_LEN + ROUTE_V6_LEN + TAG_LEN;
const RAW_MAX_LEN: usize = RAW_V6_LEN;
const UFRAG_V4_LEN: usize = b64_len(RAW_V4_LEN);
const UFRAG_V6_LEN: usize = b64_len(RAW_V6_LEN);
// The lengths the module docs promise (and that ICE allows: 4..=256).
const _: () = assert!(
    UFRAG_V4_LEN == 60
        && UFRAG_V6_LEN == 76
        && b64_len(RAW_UNTIMED_V4_LEN) == 55
        && b64_len(RAW_UNTIMED_V6_LEN) == 71
        && RAW_V6_LEN <= DECODE_SCRATCH_LEN
);
const FAMILY_V4: u8 = 4;
const FAMILY_V6: u8 = 6;

/// Longest ufrag ICE allows (RFC 8839); anything longer is not a ufrag at all.
const ICE_UFRAG_MAX: usize = 256;
/// Bytes that a maximal ICE ufrag could decode to; the decode scratch buffer size.
const DECODE_SCRATCH_LEN: usize = ICE_UFRAG_MAX / 4 * 3;

/// Unpadded base64 length of `n` bytes.
const fn b64_len(n: usize) -> usize {
    (n * 4).div_ceil(3)
}

/// A fleet key: 32 secret bytes shared by relays and transceivers, plus the id that is
/// carried in clear in every hint so that decoders can pick the right key during rotation.
///
/// `Debug` never prints the key bytes.
#[derive(Clone)]
pub struct FleetKey {
    id: u8,
    key: [u8; 32],
}

impl FleetKey {
    /// A key from raw bytes.
    pub fn new(id: u8, key: [u8; 32]) -> Self {
        Self { id, key }
    }

    /// A key from 64 hex characters (either case); surrounding whitespace is ignored.
    /// Errors say what is wrong without echoing any of the input.
    pub fn from_hex(id: u8, hex: &str) -> Result<Self, KeyError> {
        let hex = hex.trim();
        let found = hex.chars().count();
        if found != 64 {
            return Err(KeyError::WrongLength { found });
        }
        let mut key = [0u8; 32];
        let mut chars = hex.chars().enumerate();
        for byte in key.iter_mut() {
            let mut nibble = || -> Result<u8, KeyError> {
                let (position, c) = chars.next().ok_or(KeyError::WrongLength { found })?;
                c.to_digit(16)
                    .and_then(|d| u8::try_from(d).ok())
                    .ok_or(KeyError::NotHex { position })
            };
            let hi = nibble()?;
            let lo = nibble()?;
            *byte = (hi << 4) | lo;
        }
        Ok(Self { id, key })
    }

    /// The secret bytes, for deriving other keys from the fleet's one secret (an HMAC of a
    /// fixed label, as the transceiver's resume key is); never for printing.
    pub fn secret(&self) -> &[u8; 32] {
        &self.key
    }

    /// The key id carried in clear in hints minted with this key.
    pub fn id(&self) -> u8 {
        self.id
    }

    fn cipher(&self) -> ChaCha20Poly1305 {
        ChaCha20Poly1305::new(Key::from_slice(&self.key))
    }
}

impl fmt::Debug for FleetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetKey")
            .field("id", &self.id)
            .field("key", &format_args!("<redacted>"))
            .finish()
    }
}

/// Why a fleet key could not be parsed. Never contains key material.
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq, Eq)]
pub enum KeyError {
    /// The key is not 64 characters long once trimmed.
    #[error("fleet key must be 64 hex characters (32 bytes), found {found} characters")]
    WrongLength {
        /// Number of characters found after trimming whitespace.
        found: usize,
    },
    /// A character is not a hex digit.
    #[error("fleet key has a non-hex character at position {position}")]
    NotHex {
        /// Zero-based character index (after trimming) of the first offending character.
        position: usize,
    },
}

/// The keys a decoder accepts: the current one (also used for minting) and, during a
/// rotation, the previous one.
#[derive(Debug, Clone)]
pub struct Keyring {
    current: FleetKey,
    previous: Option<FleetKey>,
}

impl Keyring {
    /// A keyring holding only `current`.
    pub fn new(current: FleetKey) -> Self {
        Self {
            current,
            previous: None,
        }
    }

    /// Also accept hints minted under `previous` (normally with a different key id). If both
    /// keys share an id, a hint with that id is tried against both.
    #[must_use = "with_previous returns the extended keyring"]
    pub fn with_previous(self, previous: FleetKey) -> Self {
        Self {
            previous: Some(previous),
            ..self
        }
    }

    /// The key to mint with.
    pub fn current(&self) -> &FleetKey {
        &self.current
    }

    fn candidates(&self, id: u8) -> impl Iterator<Item = &FleetKey> {
        std::iter::once(&self.current)
            .chain(self.previous.as_ref())
            .filter(move |k| k.id == id)
    }
}

/// What a hint says: which cluster owns the session and which transceiver loop socket
/// terminates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RoutingHint {
    /// Cluster that owns the session; a relay of another cluster forwards to that cluster.
    pub cluster_id: u32,
    /// The owning transceiver media loop's UDP address (IPv6 flow info / scope id not carried).
    pub loop_addr: SocketAddr,
}

/// When a hint was minted: whole minutes since the Unix epoch (UTC). Coarse on purpose; see
/// the module docs. The crate reads no clock: the minter passes the time in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MintTime(u32);

impl MintTime {
    /// From seconds since the Unix epoch, rounded down to the minute (saturating in the year
    /// 10,000).
    pub fn from_unix_secs(secs: u64) -> Self {
        Self(u32::try_from(secs / 60).unwrap_or(u32::MAX))
    }

    /// From whole minutes since the Unix epoch.
    pub fn from_unix_minutes(minutes: u32) -> Self {
        Self(minutes)
    }

    /// From a wall-clock time; times before the epoch become the epoch.
    pub fn from_system_time(t: SystemTime) -> Self {
        Self::from_unix_secs(t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()))
    }

    /// Whole minutes since the Unix epoch.
    pub fn unix_minutes(self) -> u32 {
        self.0
    }

    /// The start of the minute, in seconds since the Unix epoch.
    pub fn unix_secs(self) -> u64 {
        u64::from(self.0) * 60
    }
}

/// An authenticated hint with what the relay needs to judge it: the route, and when it was
/// minted (`None` for a version 1 hint, which carries no mint time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DecodedHint {
    /// Where the session lives.
    pub route: RoutingHint,
    /// When the hint was minted, if its version carries it.
    pub minted: Option<MintTime>,
}

/// Why a ufrag is not a valid routing hint. All variants mean "drop, create no state".
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq, Eq)]
pub enum HintError {
    /// A character outside the ICE/base64 alphabet, or a non-canonical encoding.
    #[error("ufrag is not canonical unpadded base64")]
    BadEncoding,
    /// The length matches no known hint layout.
    #[error("ufrag length matches no hint layout")]
    BadLength,
    /// The version byte is not one this crate understands.
    #[error("unknown hint version")]
    UnknownVersion,
    /// No key in the keyring has the hint's key id.
    #[error("hint key id not in keyring")]
    UnknownKeyId,
    /// The AEAD tag did not verify: forged, corrupted, or minted under another key.
    #[error("hint authentication failed")]
    AuthFailed,
    /// Authenticated, but the address family byte is invalid for this layout.
    #[error("hint carries an invalid address")]
    BadAddress,
}

impl HintError {
    /// Short snake_case label, for drop counters.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::BadEncoding => "bad_encoding",
            Self::BadLength => "bad_length",
            Self::UnknownVersion => "unknown_version",
            Self::UnknownKeyId => "unknown_key_id",
            Self::AuthFailed => "auth_failed",
            Self::BadAddress => "bad_address",
        }
    }
}

/// Mint the server ICE ufrag for a session, minted at `minted` (the minter's wall clock,
/// e.g. `MintTime::from_system_time(SystemTime::now())`). `nonce` is per-session randomness
/// from the caller (the crate has no RNG); it must not repeat under the same key.
///
/// The result uses only ICE characters and is 60 (IPv4) or 76 (IPv6) characters long.
pub fn mint(
    key: &FleetKey,
    hint: &RoutingHint,
    minted: MintTime,
    nonce: [u8; NONCE_LEN],
) -> String {
    let mut out = [0u8; MAX_UFRAG_LEN];
    let n = mint_into(key, hint, minted, nonce, &mut out);
    // The base64 alphabet is ASCII, so every byte maps to one char.
    out[..n].iter().map(|&b| char::from(b)).collect()
}

/// Same as [`mint`], writing into `out`; returns the number of bytes written.
///
/// # Panics
///
/// If `out` is shorter than the minted ufrag; any buffer of [`MAX_UFRAG_LEN`] bytes suffices.
pub fn mint_into(
    key: &FleetKey,
    hint: &RoutingHint,
    minted: MintTime,
    nonce: [u8; NONCE_LEN],
    out: &mut [u8],
) -> usize {
    seal(key, VERSION, hint, Some(minted), nonce, out)
}

/// Mint a **version 1** ufrag (no mint time: it never expires at relays that accept it). Only
/// for testing how relays treat hints from a fleet that has not been upgraded yet; production
/// minters use [`mint`].
pub fn mint_untimed(key: &FleetKey, hint: &RoutingHint, nonce: [u8; NONCE_LEN]) -> String {
    let mut out = [0u8; MAX_UFRAG_LEN];
    let n = seal(key, VERSION_UNTIMED, hint, None, nonce, &mut out);
    out[..n].iter().map(|&b| char::from(b)).collect()
}

/// Builds `raw` for `version` (the mint time is written iff `minted` is given) and encodes it
/// into `out`; returns the number of bytes written.
fn seal(
    key: &FleetKey,
    version: u8,
    hint: &RoutingHint,
    minted: Option<MintTime>,
    nonce: [u8; NONCE_LEN],
    out: &mut [u8],
) -> usize {
    let mut raw = [0u8; RAW_MAX_LEN];
    raw[0] = version;
    raw[1] = key.id;
    raw[2..PREFIX_LEN].copy_from_slice(&nonce);

    let pt_len = write_plaintext(
        hint,
        minted,
        &mut raw[PREFIX_LEN..PREFIX_LEN + PLAINTEXT_MAX_LEN],
    );
    let (head, rest) = raw.split_at_mut(PREFIX_LEN);
    let aad = [version, key.id];
    let tag = key
        .cipher()
        .encrypt_in_place_detached(Nonce::from_slice(&nonce), &aad, &mut rest[..pt_len])
        .expect("ChaCha20-Poly1305 only fails for plaintexts of gigabytes");
    rest[pt_len..pt_len + TAG_LEN].copy_from_slice(&tag);
    let raw_len = head.len() + pt_len + TAG_LEN;

    let need = b64_len(raw_len);
    assert!(
        out.len() >= need,
        "mint_into: output buffer of {} bytes, need {need}",
        out.len()
    );
    STANDARD_NO_PAD
        .encode_slice(&raw[..raw_len], &mut out[..need])
        .expect("output buffer sized exactly for the encoding")
}

/// Writes the plaintext into `out` (at least `PLAINTEXT_MAX_LEN` bytes); returns its length.
fn write_plaintext(hint: &RoutingHint, minted: Option<MintTime>, out: &mut [u8]) -> usize {
    out[0..4].copy_from_slice(&hint.cluster_id.to_be_bytes());
    let ip_end = match hint.loop_addr.ip() {
        IpAddr::V4(ip) => {
            out[4] = FAMILY_V4;
            out[5..9].copy_from_slice(&ip.octets());
            9
        }
        IpAddr::V6(ip) => {
            out[4] = FAMILY_V6;
            out[5..21].copy_from_slice(&ip.octets());
            21
        }
    };
    out[ip_end..ip_end + 2].copy_from_slice(&hint.loop_addr.port().to_be_bytes());
    let route_end = ip_end + 2;
    match minted {
        Some(t) => {
            out[route_end..route_end + MINT_TIME_LEN].copy_from_slice(&t.0.to_be_bytes());
            route_end + MINT_TIME_LEN
        }
        None => route_end,
    }
}

/// Decode and verify a ufrag (the raw bytes as they appear in the STUN USERNAME): the route
/// only. A relay deciding whether to route uses [`decode_timed`], which also says how old the
/// hint is.
pub fn decode(keys: &Keyring, ufrag: &[u8]) -> Result<RoutingHint, HintError> {
    decode_timed(keys, ufrag).map(|d| d.route)
}

/// Decode and verify a ufrag (the raw bytes as they appear in the STUN USERNAME), version 2
/// or 1, with its mint time (`None` for version 1).
///
/// Zero allocation: everything happens in stack buffers. Never panics.
pub fn decode_timed(keys: &Keyring, ufrag: &[u8]) -> Result<DecodedHint, HintError> {
    if ufrag.len() > ICE_UFRAG_MAX {
        return Err(HintError::BadLength);
    }
    let mut scratch = [0u8; DECODE_SCRATCH_LEN];
    let raw_len = STANDARD_NO_PAD
        .decode_slice(ufrag, &mut scratch)
        .map_err(|e| match e {
            DecodeSliceError::DecodeError(DecodeError::InvalidLength(_))
            | DecodeSliceError::OutputSliceTooSmall => HintError::BadLength,
            DecodeSliceError::DecodeError(_) => HintError::BadEncoding,
        })?;
    let raw = scratch.get(..raw_len).ok_or(HintError::BadLength)?;

    let version = match raw.first() {
        None => return Err(HintError::BadLength),
        Some(&v @ (VERSION | VERSION_UNTIMED)) => v,
        Some(_) => return Err(HintError::UnknownVersion),
    };
    let timed = version == VERSION;
    let (family, pt_len) = match (timed, raw.len()) {
        (true, RAW_V4_LEN) => (FAMILY_V4, ROUTE_V4_LEN + MINT_TIME_LEN),
        (true, RAW_V6_LEN) => (FAMILY_V6, ROUTE_V6_LEN + MINT_TIME_LEN),
        (false, RAW_UNTIMED_V4_LEN) => (FAMILY_V4, ROUTE_V4_LEN),
        (false, RAW_UNTIMED_V6_LEN) => (FAMILY_V6, ROUTE_V6_LEN),
        _ => return Err(HintError::BadLength),
    };
    let key_id = raw[1];
    let aad = [version, key_id];
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&raw[2..PREFIX_LEN]);
    let mut tag = [0u8; TAG_LEN];
    tag.copy_from_slice(&raw[PREFIX_LEN + pt_len..]);

    let mut candidates = keys.candidates(key_id).peekable();
    if candidates.peek().is_none() {
        return Err(HintError::UnknownKeyId);
    }
    let mut pt = [0u8; PLAINTEXT_MAX_LEN];
    let pt = &mut pt[..pt_len];
    let verified = candidates.any(|key| {
        pt.copy_from_slice(&raw[PREFIX_LEN..PREFIX_LEN + pt_len]);
        key.cipher()
            .decrypt_in_place_detached(Nonce::from_slice(&nonce), &aad, pt, Tag::from_slice(&tag))
            .is_ok()
    });
    if !verified {
        return Err(HintError::AuthFailed);
    }
    let (route_pt, minted) = if timed {
        let (route_pt, time) = pt
            .split_last_chunk::<MINT_TIME_LEN>()
            .ok_or(HintError::BadLength)?;
        (route_pt, Some(MintTime(u32::from_be_bytes(*time))))
    } else {
        (&pt[..], None)
    };
    Ok(DecodedHint {
        route: read_route(route_pt, family)?,
        minted,
    })
}

/// Parses the route part of an authenticated plaintext whose length matches `family`.
fn read_route(pt: &[u8], family: u8) -> Result<RoutingHint, HintError> {
    let (&[c0, c1, c2, c3, fam], rest) = pt.split_first_chunk::<5>().ok_or(HintError::BadLength)?;
    if fam != family {
        return Err(HintError::BadAddress);
    }
    let cluster_id = u32::from_be_bytes([c0, c1, c2, c3]);
    let loop_addr = match family {
        FAMILY_V4 => {
            let (ip, port) = rest.split_first_chunk::<4>().ok_or(HintError::BadLength)?;
            let port = read_port(port)?;
            SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(*ip), port))
        }
        _ => {
            let (ip, port) = rest.split_first_chunk::<16>().ok_or(HintError::BadLength)?;
            let port = read_port(port)?;
            SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(*ip), port, 0, 0))
        }
    };
    Ok(RoutingHint {
        cluster_id,
        loop_addr,
    })
}

fn read_port(bytes: &[u8]) -> Result<u16, HintError> {
    match bytes {
        &[hi, lo] => Ok(u16::from_be_bytes([hi, lo])),
        _ => Err(HintError::BadLength),
    }
}

#[cfg(test)]
mod tests;
