//! The relays in front of the transceiver: the routing hints they decode (fleet key, cluster,
//! the IP they reach the loops at), the networks they send from, and which relay ingress an
//! answer advertises.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use voxgate_proto::hint::FleetKey;

use super::cidr::parse_net;
use super::error::ConfigError;
use crate::control::client_origin::ProxyTrust;
use crate::control::ingress::{self, IngressError, IngressSelector, IngressSpec};

/// The relays in front of this transceiver and the routing hints they decode.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Relays and routing hints")]
pub struct RoutingFlags {
    /// IP at which relays reach the media loops, written (encrypted) into every routing hint.
    /// Default: the --media-listen IP, which must then be a specific address (not 0.0.0.0/::).
    #[arg(long, env = "VOXGATE_INTERNAL_IP")]
    pub internal_ip: Option<IpAddr>,

    /// Networks of the relays in front of this transceiver, as CIDRs (e.g. `10.0.0.0/8`). Only
    /// datagrams from these carry a relay header that is believed; from anywhere else a
    /// relay-framed datagram is dropped (counted as `relay_not_allowed`). Default: none (direct
    /// clients only).
    #[arg(long, env = "VOXGATE_RELAYS", value_delimiter = ',', value_parser = parse_net)]
    pub relays: Vec<ipnet::IpNet>,

    /// Says on purpose that no relay sits in front of this transceiver although a fleet key and
    /// addresses to advertise (--advertise or --ingress, e.g. a 1:1 NAT's public address) are
    /// set. Without it, that combination with an empty --relays refuses to start: every
    /// datagram a relay forwarded would be dropped (`relay_not_allowed`) and callers would
    /// wait in ICE checking.
    #[arg(
        long,
        env = "VOXGATE_NO_RELAYS",
        default_value_t = false,
        conflicts_with = "relays"
    )]
    pub no_relays: bool,

    /// Cluster id written into routing hints (relays forward other clusters' hints onward).
    #[arg(long, env = "VOXGATE_CLUSTER_ID", default_value_t = 0)]
    pub cluster_id: u32,

    /// Fleet key shared with relays (64 hex chars). Random per process when absent and no file.
    #[arg(
        long,
        env = "VOXGATE_FLEET_KEY",
        hide_env_values = true,
        conflicts_with = "fleet_key_file"
    )]
    pub fleet_key: Option<String>,

    /// File holding the fleet key as 64 hex chars (e.g. a mounted secret).
    #[arg(long, env = "VOXGATE_FLEET_KEY_FILE")]
    pub fleet_key_file: Option<PathBuf>,

    /// Key id of the fleet key, carried in clear in every hint so relays can rotate keys.
    #[arg(long, env = "VOXGATE_FLEET_KEY_ID", default_value_t = 1)]
    pub fleet_key_id: u8,
}

/// Which relay addresses an answer advertises, chosen per request.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Relay ingress steering")]
pub struct IngressFlags {
    /// Addresses put in the answer's ICE candidates, comma separated, used as-is for every loop
    /// (typically the relay's public address). Default: each loop's own socket address.
    #[arg(long, env = "VOXGATE_ADVERTISE", value_delimiter = ',')]
    pub advertise: Vec<SocketAddr>,

    /// With --advertise: the relays' public TCP addresses for the answer's passive TCP
    /// candidates, comma separated (default: the --advertise addresses, as a relay's TCP
    /// listener defaults to its UDP IP:port). With --ingress use --ingress-tcp instead.
    #[arg(long, env = "VOXGATE_ADVERTISE_TCP", value_delimiter = ',')]
    pub advertise_tcp: Vec<SocketAddr>,

    /// A named relay ingress, NAME=ADDR[,ADDR...] (IPv4 and/or IPv6 relay public addresses,
    /// e.g. `eu=198.51.100.10:3478,[2001:db8::10]:3478`). Repeatable; each new session's answer
    /// advertises the addresses of one ingress, chosen per request (see --ingress-header,
    /// --ingress-cidr, --ingress-default). In VOXGATE_INGRESS, separate entries with `;`.
    /// Cannot be combined with --advertise (which is the single ingress `default`).
    #[arg(long = "ingress", env = "VOXGATE_INGRESS", value_delimiter = ';',
          value_parser = ingress::parse_named_addrs)]
    pub ingresses: Vec<(String, Vec<SocketAddr>)>,

    /// Where an ingress's relays accept ICE over TCP, NAME=ADDR[,ADDR...], when not at its UDP
    /// addresses (the default, as a relay's --tcp-listen defaults to its UDP address), e.g.
    /// `eu=198.51.100.10:443`. Repeatable; `;` between entries in VOXGATE_INGRESS_TCP.
    #[arg(long = "ingress-tcp", env = "VOXGATE_INGRESS_TCP", value_delimiter = ';',
          value_parser = ingress::parse_named_addrs)]
    pub ingress_tcp: Vec<(String, Vec<SocketAddr>)>,

    /// Request header that steers the ingress, set by a trusted proxy in front of signaling
    /// (e.g. `CF-IPCountry`). Read only from --trusted-proxies peers; from anyone else it is
    /// ignored and counted (voxgate_untrusted_header_total).
    #[arg(long, env = "VOXGATE_INGRESS_HEADER")]
    pub ingress_header: Option<String>,

    /// How the --ingress-header value is read: `country` (an ISO country code looked up in
    /// --ingress-country; the default) or `name` (the name of an ingress).
    #[arg(long, env = "VOXGATE_INGRESS_HEADER_MODE", value_enum)]
    pub ingress_header_mode: Option<ingress::HeaderMode>,

    /// Country → ingress for --ingress-header in country mode, CC=NAME (e.g. `DE=eu`).
    /// Repeatable or comma separated. A code not in the table falls through to the CIDR rules.
    #[arg(long = "ingress-country", env = "VOXGATE_INGRESS_COUNTRY", value_delimiter = ',',
          value_parser = ingress::parse_country_rule)]
    pub ingress_countries: Vec<(String, String)>,

    /// Client network → ingress, CIDR=NAME (e.g. `203.0.113.0/24=us`, `2001:db8::/32=eu`),
    /// applied when the header chose nothing. Longest prefix wins. Repeatable or comma
    /// separated. The client IP is the peer's, or X-Forwarded-For's from a trusted proxy.
    #[arg(long = "ingress-cidr", env = "VOXGATE_INGRESS_CIDR", value_delimiter = ',',
          value_parser = ingress::parse_cidr_rule)]
    pub ingress_cidrs: Vec<(ipnet::IpNet, String)>,

    /// Ingress for requests no rule matched. Default: the first --ingress.
    #[arg(long, env = "VOXGATE_INGRESS_DEFAULT")]
    pub ingress_default: Option<String>,

    /// Networks (CIDRs, comma separated) of the proxies / load balancers in front of
    /// signaling. Only requests from these may set the client IP (X-Forwarded-For, rightmost
    /// hop not in this list) and the --ingress-header. Default: none (every peer is a client).
    #[arg(long, env = "VOXGATE_TRUSTED_PROXIES", value_delimiter = ',', value_parser = parse_net)]
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

/// Where the fleet key came from: relays can only decode hints of a shared key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    Flag,
    File,
    RandomPerProcess,
}

impl RoutingFlags {
    /// The IP written into routing hints: `--internal-ip`, else the IP of `media_listen`
    /// (`--media-listen`) unless that is a wildcard.
    pub fn internal_ip(&self, media_listen: SocketAddr) -> Result<IpAddr, ConfigError> {
        match self.internal_ip {
            Some(ip) => Ok(ip),
            None if media_listen.ip().is_unspecified() => {
                Err(ConfigError::NoInternalIp(media_listen.ip()))
            }
            None => Ok(media_listen.ip()),
        }
    }

    /// Refuses a fleet key (the sign of a fleet behind relays) with addresses to advertise but
    /// no `--relays`: the loops would believe no relay and drop everything relays forward,
    /// with only a counter to show for it. `--no-relays` says the combination is meant.
    pub fn check_relays(&self, ingress: &IngressFlags) -> Result<(), ConfigError> {
        let keyed = self.fleet_key.is_some() || self.fleet_key_file.is_some();
        let advertised = if !ingress.advertise.is_empty() {
            "--advertise"
        } else if !ingress.ingresses.is_empty() {
            "--ingress"
        } else {
            return Ok(());
        };
        if keyed && self.relays.is_empty() && !self.no_relays {
            return Err(ConfigError::FleetKeyWithoutRelays { advertised });
        }
        Ok(())
    }

    pub fn fleet_key(&self) -> Result<(FleetKey, KeySource), ConfigError> {
        if let Some(hex) = &self.fleet_key {
            return Ok((FleetKey::from_hex(self.fleet_key_id, hex)?, KeySource::Flag));
        }
        if let Some(path) = &self.fleet_key_file {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::KeyFile {
                path: path.clone(),
                source,
            })?;
            return Ok((
                FleetKey::from_hex(self.fleet_key_id, &text)?,
                KeySource::File,
            ));
        }
        let key: [u8; 32] = rand::random();
        Ok((
            FleetKey::new(self.fleet_key_id, key),
            KeySource::RandomPerProcess,
        ))
    }
}

impl IngressFlags {
    /// The validated ingress map and its rules; `None` in direct mode (each loop advertises
    /// its own socket). `--advertise` is the single ingress `default`.
    pub fn selector(&self) -> Result<Option<IngressSelector>, ConfigError> {
        let ingresses = match (self.advertise.is_empty(), self.ingresses.is_empty()) {
            (false, false) => return Err(IngressError::AdvertiseAndIngress.into()),
            (false, true) => vec![("default".to_string(), self.advertise.clone())],
            (true, _) => self.ingresses.clone(),
        };
        // `--advertise-tcp` is `--ingress-tcp` for the ingress `--advertise` makes.
        let mut tcp_overrides = self.ingress_tcp.clone();
        if !self.advertise_tcp.is_empty() {
            if self.advertise.is_empty() {
                return Err(IngressError::NoIngressMap("--advertise-tcp").into());
            }
            tcp_overrides.push(("default".to_string(), self.advertise_tcp.clone()));
        }
        let spec = IngressSpec {
            ingresses,
            tcp_overrides,
            header: self.ingress_header.clone(),
            header_mode: self.ingress_header_mode,
            countries: self.ingress_countries.clone(),
            cidrs: self.ingress_cidrs.clone(),
            default: self.ingress_default.clone(),
        };
        Ok(IngressSelector::from_spec(&spec)?)
    }

    /// Which signaling peers are proxies whose X-Forwarded-For and ingress header count.
    pub fn proxy_trust(&self, selector: Option<&IngressSelector>) -> ProxyTrust {
        ProxyTrust::new(
            self.trusted_proxies.clone(),
            selector.and_then(|s| s.header().cloned()),
        )
    }
}
