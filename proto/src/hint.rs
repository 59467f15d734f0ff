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
//! | 0 | 1 | version, `1` |
//! | 1 | 1 | key id of the fleet key used (in clear, for rotation) |
//! | 2 | 12 | nonce: per-session randomness supplied by the minter |
//! | 14 | 11 or 23 | ciphertext: ChaCha20-Poly1305(key, nonce, aad = `[version, key_id]`, plaintext) |
//! | 25 or 37 | 16 | Poly1305 tag |
//!
//! `plaintext`, byte by byte:
//!
//! | offset | len | field |
//! |---|---|---|
//! | 0 | 4 | cluster id, u32 big-endian |
//! | 4 | 1 | address family: `4` or `6` |
//! | 5 | 4 or 16 | IP address of the owning transceiver loop, network order |
//! | 9 or 21 | 2 | UDP port of that loop, u16 big-endian |
//!
//! So `raw` is 41 bytes for IPv4 (ufrag: 55 chars) and 53 bytes for IPv6 (ufrag: 71 chars).
//! The family byte must agree with the length. IPv6 flow info and scope id are not carried
//! (they decode as 0). The length reveals the address family, nothing else.
//!
//! The nonce must not repeat under one key: callers draw it from a CSPRNG per mint (96 random
//! bits make a collision negligible at any realistic session count).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use base64::engine::general_purpose::STANDARD_NO_PAD;
use base64::{DecodeError, DecodeSliceError, Engine as _};
use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce, Tag};

/// Length of the per-session nonce carried in clear in the hint.
pub const NONCE_LEN: usize = 12;

/// Upper bound of a minted ufrag's length (the IPv6 form).
pub const MAX_UFRAG_LEN: usize = UFRAG_V6_LEN;

/// The only hint version this crate mints and accepts.
const VERSION: u8 = 1;
const PREFIX_LEN: usize = 2 + NONCE_LEN;
const TAG_LEN: usize = 16;
const PLAINTEXT_V4_LEN: usize = 4 + 1 + 4 + 2;
const PLAINTEXT_V6_LEN: usize = 4 + 1 + 16 + 2;
const PLAINTEXT_MAX_LEN: usize = PLAINTEXT_V6_LEN;
const RAW_V4_LEN: usize = PREFIX_LEN + PLAINTEXT_V4_LEN + TAG_LEN;
const RAW_V6_LEN: usize = PREFIX_LEN + PLAINTEXT_V6_LEN + TAG_LEN;
const RAW_MAX_LEN: usize = RAW_V6_LEN;
const UFRAG_V4_LEN: usize = b64_len(RAW_V4_LEN);
const UFRAG_V6_LEN: usize = b64_len(RAW_V6_LEN);
// The lengths the module docs promise (and that ICE allows: 4..=256).
const _: () = assert!(UFRAG_V4_LEN == 55 && UFRAG_V6_LEN == 71 && RAW_V6_LEN <= DECODE_SCRATCH_LEN);
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

/// Mint the server ICE ufrag for a session. `nonce` is per-session randomness from the
/// caller (the crate has no RNG); it must not repeat under the same key.
///
/// The result uses only ICE characters and is 55 (IPv4) or 71 (IPv6) characters long.
pub fn mint(key: &FleetKey, hint: &RoutingHint, nonce: [u8; NONCE_LEN]) -> String {
    let mut out = [0u8; MAX_UFRAG_LEN];
    let n = mint_into(key, hint, nonce, &mut out);
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
    nonce: [u8; NONCE_LEN],
    out: &mut [u8],
) -> usize {
    let mut raw = [0u8; RAW_MAX_LEN];
    raw[0] = VERSION;
    raw[1] = key.id;
    raw[2..PREFIX_LEN].copy_from_slice(&nonce);

    let pt_len = write_plaintext(hint, &mut raw[PREFIX_LEN..PREFIX_LEN + PLAINTEXT_MAX_LEN]);
    let (head, rest) = raw.split_at_mut(PREFIX_LEN);
    let aad = [VERSION, key.id];
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
fn write_plaintext(hint: &RoutingHint, out: &mut [u8]) -> usize {
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
    ip_end + 2
}

/// Decode and verify a ufrag (the raw bytes as they appear in the STUN USERNAME).
///
/// Zero allocation: everything happens in stack buffers. Never panics.
pub fn decode(keys: &Keyring, ufrag: &[u8]) -> Result<RoutingHint, HintError> {
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

    match raw.first() {
        None => return Err(HintError::BadLength),
        Some(&VERSION) => {}
        Some(_) => return Err(HintError::UnknownVersion),
    }
    let (family, pt_len) = match raw.len() {
        RAW_V4_LEN => (FAMILY_V4, PLAINTEXT_V4_LEN),
        RAW_V6_LEN => (FAMILY_V6, PLAINTEXT_V6_LEN),
        _ => return Err(HintError::BadLength),
    };
    let key_id = raw[1];
    let aad = [VERSION, key_id];
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
    read_plaintext(pt, family)
}

/// Parses an authenticated plaintext whose length matches `family`.
fn read_plaintext(pt: &[u8], family: u8) -> Result<RoutingHint, HintError> {
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
mod tests {
    use super::*;

    const KEY_BYTES: [u8; 32] = [
        0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78, 0x87, 0x96, 0xa5, 0xb4, 0xc3, 0xd2, 0xe1,
        0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54,
        0x32, 0x10,
    ];

    fn key() -> FleetKey {
        FleetKey::new(7, KEY_BYTES)
    }

    fn ring() -> Keyring {
        Keyring::new(key())
    }

    fn v4_hint(cluster_id: u32) -> RoutingHint {
        RoutingHint {
            cluster_id,
            loop_addr: "10.1.2.3:40001".parse().unwrap(),
        }
    }

    fn v6_hint(cluster_id: u32) -> RoutingHint {
        RoutingHint {
            cluster_id,
            loop_addr: "[fd00:1234::abcd:1]:50007".parse().unwrap(),
        }
    }

    fn nonce(seed: u8) -> [u8; NONCE_LEN] {
        std::array::from_fn(|i| seed.wrapping_mul(31).wrapping_add(i as u8))
    }

    fn is_ice_char(b: u8) -> bool {
        b.is_ascii_alphanumeric() || b == b'+' || b == b'/'
    }

    #[test]
    fn layout_lengths_match_the_documented_format() {
        assert_eq!(RAW_V4_LEN, 41);
        assert_eq!(RAW_V6_LEN, 53);
        assert_eq!(UFRAG_V4_LEN, 55);
        assert_eq!(UFRAG_V6_LEN, 71);
        assert_eq!(MAX_UFRAG_LEN, 71);
    }

    #[test]
    fn v4_hint_round_trips_for_extreme_cluster_ids() {
        for cluster_id in [0, 1, 0x8000_0000, u32::MAX] {
            let hint = v4_hint(cluster_id);
            let ufrag = mint(&key(), &hint, nonce(1));
            assert_eq!(ufrag.len(), UFRAG_V4_LEN);
            assert_eq!(decode(&ring(), ufrag.as_bytes()), Ok(hint));
        }
    }

    #[test]
    fn v6_hint_round_trips_for_extreme_cluster_ids() {
        for cluster_id in [0, 1, 0x8000_0000, u32::MAX] {
            let hint = v6_hint(cluster_id);
            let ufrag = mint(&key(), &hint, nonce(2));
            assert_eq!(ufrag.len(), UFRAG_V6_LEN);
            assert_eq!(decode(&ring(), ufrag.as_bytes()), Ok(hint));
        }
    }

    #[test]
    fn v4_mapped_v6_address_stays_v6() {
        let hint = RoutingHint {
            cluster_id: 9,
            loop_addr: "[::ffff:10.0.0.1]:4000".parse().unwrap(),
        };
        let ufrag = mint(&key(), &hint, nonce(3));
        assert_eq!(decode(&ring(), ufrag.as_bytes()), Ok(hint));
    }

    #[test]
    fn v6_scope_and_flowinfo_are_dropped() {
        let hint = RoutingHint {
            cluster_id: 1,
            loop_addr: SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 9, 77, 3)),
        };
        let ufrag = mint(&key(), &hint, nonce(4));
        let decoded = decode(&ring(), ufrag.as_bytes()).unwrap();
        assert_eq!(
            decoded.loop_addr,
            SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 9, 0, 0))
        );
    }

    #[test]
    fn minted_ufrag_uses_only_ice_chars_within_ice_length() {
        for hint in [v4_hint(5), v6_hint(5)] {
            let ufrag = mint(&key(), &hint, nonce(5));
            assert!((4..=256).contains(&ufrag.len()), "{ufrag}");
            assert!(ufrag.bytes().all(is_ice_char), "{ufrag}");
        }
    }

    #[test]
    fn minted_ufrag_does_not_contain_the_address_in_clear() {
        let hint = v4_hint(5);
        let ufrag = mint(&key(), &hint, nonce(6));
        assert!(!ufrag.contains("10.1.2.3"));
        let raw = STANDARD_NO_PAD.decode(&ufrag).unwrap();
        assert!(!raw.windows(4).any(|w| w == [10, 1, 2, 3]));
    }

    #[test]
    fn mint_into_matches_mint() {
        let hint = v6_hint(42);
        let mut buf = [0u8; MAX_UFRAG_LEN];
        let n = mint_into(&key(), &hint, nonce(7), &mut buf);
        assert_eq!(&buf[..n], mint(&key(), &hint, nonce(7)).as_bytes());
    }

    #[test]
    #[should_panic(expected = "output buffer")]
    fn mint_into_too_small_buffer_panics_with_message() {
        let mut buf = [0u8; UFRAG_V4_LEN - 1];
        mint_into(&key(), &v4_hint(1), nonce(8), &mut buf);
    }

    #[test]
    fn distinct_nonces_give_distinct_ufrags() {
        let hint = v4_hint(3);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..256 {
            let n: [u8; NONCE_LEN] = rand::random();
            let ufrag = mint(&key(), &hint, n);
            assert_eq!(decode(&ring(), ufrag.as_bytes()), Ok(hint));
            assert!(seen.insert(ufrag), "duplicate ufrag");
        }
    }

    #[test]
    fn previous_key_in_keyring_still_decodes() {
        let old = FleetKey::new(1, [0x11; 32]);
        let new = FleetKey::new(2, [0x22; 32]);
        let ring = Keyring::new(new.clone()).with_previous(old.clone());
        assert_eq!(ring.current().id(), 2);
        let old_ufrag = mint(&old, &v4_hint(1), nonce(9));
        let new_ufrag = mint(&new, &v6_hint(2), nonce(9));
        assert_eq!(decode(&ring, old_ufrag.as_bytes()), Ok(v4_hint(1)));
        assert_eq!(decode(&ring, new_ufrag.as_bytes()), Ok(v6_hint(2)));
        // Once the previous key is dropped, its hints stop decoding.
        assert_eq!(
            decode(&Keyring::new(new), old_ufrag.as_bytes()),
            Err(HintError::UnknownKeyId)
        );
    }

    #[test]
    fn keys_sharing_an_id_are_both_tried() {
        let a = FleetKey::new(4, [0xaa; 32]);
        let b = FleetKey::new(4, [0xbb; 32]);
        let ring = Keyring::new(a).with_previous(b.clone());
        let ufrag = mint(&b, &v4_hint(6), nonce(10));
        assert_eq!(decode(&ring, ufrag.as_bytes()), Ok(v4_hint(6)));
    }

    #[test]
    fn unknown_key_id_is_rejected() {
        let other = FleetKey::new(8, KEY_BYTES);
        let ufrag = mint(&other, &v4_hint(1), nonce(11));
        assert_eq!(
            decode(&ring(), ufrag.as_bytes()),
            Err(HintError::UnknownKeyId)
        );
    }

    #[test]
    fn hint_minted_with_another_key_of_the_same_id_is_rejected() {
        let forger = FleetKey::new(key().id(), [0x5a; 32]);
        for hint in [v4_hint(1), v6_hint(1)] {
            let ufrag = mint(&forger, &hint, nonce(12));
            assert_eq!(
                decode(&ring(), ufrag.as_bytes()),
                Err(HintError::AuthFailed)
            );
        }
    }

    #[test]
    fn flipping_any_bit_of_the_ufrag_is_rejected() {
        for hint in [v4_hint(77), v6_hint(77)] {
            let ufrag = mint(&key(), &hint, nonce(13)).into_bytes();
            for pos in 0..ufrag.len() {
                for bit in 0..8 {
                    let mut bad = ufrag.clone();
                    bad[pos] ^= 1 << bit;
                    assert!(
                        decode(&ring(), &bad).is_err(),
                        "bit {bit} at {pos} accepted"
                    );
                }
            }
        }
    }

    #[test]
    fn replacing_any_char_of_the_ufrag_is_rejected() {
        const ICE: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for hint in [v4_hint(77), v6_hint(77)] {
            let ufrag = mint(&key(), &hint, nonce(14)).into_bytes();
            for pos in 0..ufrag.len() {
                for &c in ICE.iter().filter(|&&c| c != ufrag[pos]) {
                    let mut bad = ufrag.clone();
                    bad[pos] = c;
                    assert!(decode(&ring(), &bad).is_err(), "{c} at {pos} accepted");
                }
            }
        }
    }

    #[test]
    fn truncated_ufrag_is_rejected_at_every_length() {
        for hint in [v4_hint(1), v6_hint(1)] {
            let ufrag = mint(&key(), &hint, nonce(15));
            for len in 0..ufrag.len() {
                assert!(decode(&ring(), &ufrag.as_bytes()[..len]).is_err(), "{len}");
            }
        }
    }

    #[test]
    fn extended_ufrag_is_rejected() {
        let ufrag = mint(&key(), &v4_hint(1), nonce(16));
        for suffix in ["A", "AA", "AAA", "AAAA"] {
            let long = format!("{ufrag}{suffix}");
            assert!(decode(&ring(), long.as_bytes()).is_err(), "{suffix}");
        }
        assert_eq!(
            decode(&ring(), &[b'A'; 300]),
            Err(HintError::BadLength),
            "longer than any ICE ufrag"
        );
    }

    #[test]
    fn non_base64_char_is_bad_encoding() {
        let mut ufrag = mint(&key(), &v4_hint(1), nonce(17)).into_bytes();
        ufrag[10] = b'-';
        assert_eq!(decode(&ring(), &ufrag), Err(HintError::BadEncoding));
        ufrag[10] = b'=';
        assert_eq!(decode(&ring(), &ufrag), Err(HintError::BadEncoding));
    }

    #[test]
    fn unknown_version_is_rejected() {
        let mut raw = STANDARD_NO_PAD
            .decode(mint(&key(), &v4_hint(1), nonce(18)))
            .unwrap();
        raw[0] = 2;
        let ufrag = STANDARD_NO_PAD.encode(&raw);
        assert_eq!(
            decode(&ring(), ufrag.as_bytes()),
            Err(HintError::UnknownVersion)
        );
    }

    #[test]
    fn authenticated_family_mismatch_is_bad_address() {
        // Hand-build a v4-length hint whose plaintext claims family 6, under the real key.
        let k = key();
        let n = nonce(19);
        let mut raw = [0u8; RAW_V4_LEN];
        raw[0] = VERSION;
        raw[1] = k.id();
        raw[2..PREFIX_LEN].copy_from_slice(&n);
        let pt = &mut raw[PREFIX_LEN..PREFIX_LEN + PLAINTEXT_V4_LEN];
        pt[4] = FAMILY_V6;
        let tag = k
            .cipher()
            .encrypt_in_place_detached(Nonce::from_slice(&n), &[VERSION, k.id()], pt)
            .unwrap();
        raw[PREFIX_LEN + PLAINTEXT_V4_LEN..].copy_from_slice(&tag);
        let ufrag = STANDARD_NO_PAD.encode(raw);
        assert_eq!(
            decode(&ring(), ufrag.as_bytes()),
            Err(HintError::BadAddress)
        );
    }

    #[test]
    fn fleet_key_debug_does_not_reveal_key() {
        let k = key();
        let dbg = format!("{k:?} {:?}", Keyring::new(k.clone()));
        let hex: String = KEY_BYTES.iter().map(|b| format!("{b:02x}")).collect();
        assert!(!dbg.to_lowercase().contains(&hex[..8]), "{dbg}");
        assert!(!dbg.contains(&format!("{:?}", &KEY_BYTES[..4])), "{dbg}");
        assert!(dbg.contains("<redacted>"));
        assert!(dbg.contains('7'));
    }

    #[test]
    fn from_hex_parses_either_case_and_trims_whitespace() {
        let hex: String = KEY_BYTES.iter().map(|b| format!("{b:02x}")).collect();
        let upper = format!("  {}\n", hex.to_uppercase());
        for text in [hex.as_str(), upper.as_str()] {
            let k = FleetKey::from_hex(7, text).unwrap();
            assert_eq!(k.id(), 7);
            // Same key: a hint minted with it decodes under the reference key.
            let ufrag = mint(&k, &v4_hint(2), nonce(20));
            assert_eq!(decode(&ring(), ufrag.as_bytes()), Ok(v4_hint(2)));
        }
    }

    #[test]
    fn from_hex_rejects_wrong_length() {
        assert_eq!(
            FleetKey::from_hex(1, "abcd").unwrap_err(),
            KeyError::WrongLength { found: 4 }
        );
        assert_eq!(
            FleetKey::from_hex(1, &"a".repeat(65)).unwrap_err(),
            KeyError::WrongLength { found: 65 }
        );
        assert_eq!(
            FleetKey::from_hex(1, "").unwrap_err(),
            KeyError::WrongLength { found: 0 }
        );
    }

    #[test]
    fn from_hex_rejects_non_hex_without_echoing_it() {
        let mut text = "0123456789abcdef".repeat(4);
        text.replace_range(9..10, "g");
        let err = FleetKey::from_hex(1, &text).unwrap_err();
        assert_eq!(err, KeyError::NotHex { position: 9 });
        assert!(!err.to_string().contains("0123456"));
        // Multi-byte characters count as characters, not bytes.
        let text = format!("é{}", "a".repeat(63));
        assert_eq!(
            FleetKey::from_hex(1, &text).unwrap_err(),
            KeyError::NotHex { position: 0 }
        );
    }

    #[test]
    fn error_labels_are_snake_case_and_distinct() {
        let all = [
            HintError::BadEncoding,
            HintError::BadLength,
            HintError::UnknownVersion,
            HintError::UnknownKeyId,
            HintError::AuthFailed,
            HintError::BadAddress,
        ];
        let labels: std::collections::HashSet<_> = all.iter().map(HintError::as_str).collect();
        assert_eq!(labels.len(), all.len());
        assert!(labels
            .iter()
            .all(|l| l.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')));
        assert_eq!(HintError::AuthFailed.as_str(), "auth_failed");
    }
}
