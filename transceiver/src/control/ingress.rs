//! Request-steered relay ingress: which relay addresses a new session's answer advertises.
//!
//! A deployment names its relay ingresses (`--ingress eu=198.51.100.10:3478`), each one or more
//! public relay addresses, and a rule that picks one per signaling request. The
//! [`IngressSelector`] is Sans-IO: it takes what the signaling edge already judged (the value
//! of the ingress header, only when a trusted proxy sent it, and the client IP) and returns
//! the chosen ingress with the reason, in this order:
//!
//! 1. `header`: the trusted header's value names an ingress, directly (`--ingress-header-mode
//!    name`) or through the country table (`--ingress-country DE=eu`);
//! 2. `cidr`: the client IP lies in an `--ingress-cidr` network (longest prefix wins);
//! 3. `default`: `--ingress-default`, else the first ingress given.
//!
//! A header value that names nothing falls through to the next rule (the caller counts it).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;

/// Longest ingress name: names become metric labels and metadata values.
pub const MAX_NAME_LEN: usize = 32;

/// One relay ingress: where its clients send UDP, and where its relays accept ICE over TCP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ingress {
    pub name: Arc<str>,
    pub udp: Vec<SocketAddr>,
    /// Defaults to the UDP addresses (a relay's `--tcp-listen` defaults to its UDP address).
    pub tcp: Vec<SocketAddr>,
}

/// How the ingress header's value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HeaderMode {
    /// An ISO 3166 country code (e.g. Cloudflare's `CF-IPCountry`), looked up in the
    /// `--ingress-country` table.
    Country,
    /// The name of an ingress.
    Name,
}

/// Why an ingress was chosen; the `reason` label of `voxgate_ingress_selected_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Header,
    Cidr,
    Default,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Header => "header",
            Reason::Cidr => "cidr",
            Reason::Default => "default",
        }
    }
}

/// The ingress a session was steered to, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressChoice {
    pub name: Arc<str>,
    pub reason: Reason,
}

/// The outcome of [`IngressSelector::select`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selection {
    /// Index into [`IngressSelector::ingresses`].
    pub index: usize,
    pub reason: Reason,
    /// A header value was given but named no ingress (it fell through to the next rule).
    pub header_unmatched: bool,
}

/// A misconfigured ingress map or rule; the message names the flag and the value.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum IngressError {
    #[error(
        "ingress name {0:?} is invalid: use 1..={MAX_NAME_LEN} of A-Z a-z 0-9 - _ (e.g. eu-west)"
    )]
    BadName(String),
    #[error("ingress {0:?} is given more than once (names are case-insensitive)")]
    DuplicateName(String),
    #[error("--ingress {0} has no address")]
    NoAddress(String),
    #[error("{flag} {value:?} names ingress {name:?}, which no --ingress defines")]
    UnknownIngress {
        flag: &'static str,
        value: String,
        name: String,
    },
    #[error("{flag} {value:?} is given more than once")]
    DuplicateRule { flag: &'static str, value: String },
    #[error("{0} needs --ingress (or --advertise): there is no ingress map to choose from")]
    NoIngressMap(&'static str),
    #[error("--advertise and --ingress cannot both be given: --advertise is the single ingress \"default\"; name it with --ingress default=ADDR,... instead")]
    AdvertiseAndIngress,
    #[error("--ingress-country needs --ingress-header (a header carrying the country code)")]
    CountryWithoutHeader,
    #[error("--ingress-header-mode needs --ingress-header (the header it reads)")]
    ModeWithoutHeader,
    #[error("--ingress-header {0} in country mode needs at least one --ingress-country CC=NAME")]
    HeaderWithoutCountries(String),
    #[error("--ingress-country is only read in --ingress-header-mode country (the mode is name)")]
    CountryInNameMode,
    #[error("--ingress-header {0:?} is not a valid HTTP header name")]
    BadHeader(String),
    #[error("{flag} expects {expected}, got {value:?}")]
    Syntax {
        flag: &'static str,
        expected: &'static str,
        value: String,
    },
}

/// The ingress header rule: which header, and how its value maps to an ingress.
#[derive(Debug, Clone)]
pub struct HeaderRule {
    pub header: axum::http::HeaderName,
    pub mode: HeaderMode,
    /// Upper-case country code → ingress index (country mode).
    countries: HashMap<String, usize>,
}

/// What the operator configured, before validation (the flags' values, in order).
#[derive(Debug, Clone, Default)]
pub struct IngressSpec {
    pub ingresses: Vec<(String, Vec<SocketAddr>)>,
    pub tcp_overrides: Vec<(String, Vec<SocketAddr>)>,
    pub header: Option<String>,
    pub header_mode: Option<HeaderMode>,
    pub countries: Vec<(String, String)>,
    pub cidrs: Vec<(IpNet, String)>,
    pub default: Option<String>,
}

/// The validated ingress map and the rule that picks one ingress per request.
#[derive(Debug, Clone)]
pub struct IngressSelector {
    ingresses: Vec<Ingress>,
    header: Option<HeaderRule>,
    /// Longest prefix first, so the first match is the most specific.
    cidrs: Vec<(IpNet, usize)>,
    default: usize,
}

impl IngressSelector {
    /// Validates `spec`. `Ok(None)` when no ingress is configured (direct mode: each loop
    /// advertises its own socket); then no rule may be given either.
    pub fn from_spec(spec: &IngressSpec) -> Result<Option<IngressSelector>, IngressError> {
        if spec.ingresses.is_empty() {
            let orphan = [
                (!spec.tcp_overrides.is_empty(), "--ingress-tcp"),
                (spec.header.is_some(), "--ingress-header"),
                (spec.header_mode.is_some(), "--ingress-header-mode"),
                (!spec.countries.is_empty(), "--ingress-country"),
                (!spec.cidrs.is_empty(), "--ingress-cidr"),
                (spec.default.is_some(), "--ingress-default"),
            ]
            .into_iter()
            .find_map(|(given, flag)| given.then_some(flag));
            return match orphan {
                Some(flag) => Err(IngressError::NoIngressMap(flag)),
                None => Ok(None),
            };
        }
        let mut ingresses: Vec<Ingress> = Vec::with_capacity(spec.ingresses.len());
        for (name, udp) in &spec.ingresses {
            check_name(name)?;
            if find(&ingresses, name).is_some() {
                return Err(IngressError::DuplicateName(name.clone()));
            }
            if udp.is_empty() {
                return Err(IngressError::NoAddress(name.clone()));
            }
            ingresses.push(Ingress {
                name: Arc::from(name.as_str()),
                udp: udp.clone(),
                tcp: udp.clone(),
            });
        }
        let mut overridden = Vec::new();
        for (name, tcp) in &spec.tcp_overrides {
            let i = lookup(&ingresses, "--ingress-tcp", name, name)?;
            if overridden.contains(&i) {
                return Err(IngressError::DuplicateRule {
                    flag: "--ingress-tcp",
                    value: name.clone(),
                });
            }
            if tcp.is_empty() {
                return Err(IngressError::NoAddress(format!("{name} (--ingress-tcp)")));
            }
            overridden.push(i);
            ingresses[i].tcp = tcp.clone();
        }
        let header = header_rule(spec, &ingresses)?;
        let mut cidrs: Vec<(IpNet, usize)> = Vec::with_capacity(spec.cidrs.len());
        for (net, name) in &spec.cidrs {
            let value = format!("{net}={name}");
            let i = lookup(&ingresses, "--ingress-cidr", &value, name)?;
            let net = net.trunc();
            if cidrs.iter().any(|(n, _)| *n == net) {
                return Err(IngressError::DuplicateRule {
                    flag: "--ingress-cidr",
                    value: net.to_string(),
                });
            }
            cidrs.push((net, i));
        }
        // Stable: equal prefix lengths of different families keep their order (they never
        // both match one address).
        cidrs.sort_by_key(|(n, _)| std::cmp::Reverse(n.prefix_len()));
        let default = match &spec.default {
            Some(name) => lookup(&ingresses, "--ingress-default", name, name)?,
            None => 0,
        };
        Ok(Some(IngressSelector {
            ingresses,
            header,
            cidrs,
            default,
        }))
    }

    pub fn ingresses(&self) -> &[Ingress] {
        &self.ingresses
    }

    /// The header the selector reads, if any (the signaling edge only passes its value on
    /// when a trusted proxy sent it).
    pub fn header(&self) -> Option<&axum::http::HeaderName> {
        self.header.as_ref().map(|h| &h.header)
    }

    pub fn default_ingress(&self) -> &Ingress {
        &self.ingresses[self.default]
    }

    /// Picks the ingress for one request: trusted header, then client CIDR, then default.
    pub fn select(&self, header_value: Option<&str>, client: Option<IpAddr>) -> Selection {
        let mut header_unmatched = false;
        if let (Some(rule), Some(value)) = (&self.header, header_value) {
            let value = value.trim();
            let hit = match rule.mode {
                HeaderMode::Name => find(&self.ingresses, value),
                HeaderMode::Country => rule
                    .countries
                    .get(value.to_ascii_uppercase().as_str())
                    .copied(),
            };
            match hit {
                Some(index) => {
                    return Selection {
                        index,
                        reason: Reason::Header,
                        header_unmatched: false,
                    }
                }
                None => header_unmatched = true,
            }
        }
        if let Some(ip) = client.map(|ip| ip.to_canonical()) {
            if let Some((_, index)) = self.cidrs.iter().find(|(net, _)| net.contains(&ip)) {
                return Selection {
                    index: *index,
                    reason: Reason::Cidr,
                    header_unmatched,
                };
            }
        }
        Selection {
            index: self.default,
            reason: Reason::Default,
            header_unmatched,
        }
    }

    /// The chosen ingress by index (from [`IngressSelector::select`]).
    pub fn ingress(&self, index: usize) -> &Ingress {
        &self.ingresses[index]
    }
}

fn header_rule(
    spec: &IngressSpec,
    ingresses: &[Ingress],
) -> Result<Option<HeaderRule>, IngressError> {
    let Some(header) = &spec.header else {
        if !spec.countries.is_empty() {
            return Err(IngressError::CountryWithoutHeader);
        }
        if spec.header_mode.is_some() {
            return Err(IngressError::ModeWithoutHeader);
        }
        return Ok(None);
    };
    let name = axum::http::HeaderName::from_bytes(header.trim().as_bytes())
        .map_err(|_| IngressError::BadHeader(header.clone()))?;
    let mode = spec.header_mode.unwrap_or(HeaderMode::Country);
    let mut countries = HashMap::new();
    match mode {
        HeaderMode::Name if !spec.countries.is_empty() => {
            return Err(IngressError::CountryInNameMode)
        }
        HeaderMode::Name => {}
        HeaderMode::Country if spec.countries.is_empty() => {
            return Err(IngressError::HeaderWithoutCountries(header.clone()))
        }
        HeaderMode::Country => {
            for (cc, target) in &spec.countries {
                let value = format!("{cc}={target}");
                let i = lookup(ingresses, "--ingress-country", &value, target)?;
                if countries.insert(cc.to_ascii_uppercase(), i).is_some() {
                    return Err(IngressError::DuplicateRule {
                        flag: "--ingress-country",
                        value: cc.to_ascii_uppercase(),
                    });
                }
            }
        }
    }
    Ok(Some(HeaderRule {
        header: name,
        mode,
        countries,
    }))
}

fn check_name(name: &str) -> Result<(), IngressError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(IngressError::BadName(name.to_string()))
    }
}

fn find(ingresses: &[Ingress], name: &str) -> Option<usize> {
    ingresses
        .iter()
        .position(|i| i.name.eq_ignore_ascii_case(name))
}

fn lookup(
    ingresses: &[Ingress],
    flag: &'static str,
    value: &str,
    name: &str,
) -> Result<usize, IngressError> {
    find(ingresses, name).ok_or_else(|| IngressError::UnknownIngress {
        flag,
        value: value.to_string(),
        name: name.to_string(),
    })
}

// ---- flag syntax (clap value parsers) ---------------------------------------------------------

/// `NAME=ADDR[,ADDR...]`, e.g. `eu=198.51.100.10:3478,[2001:db8::10]:3478`.
pub fn parse_named_addrs(s: &str) -> Result<(String, Vec<SocketAddr>), String> {
    let (name, addrs) = split_pair(s, "NAME=ADDR[,ADDR...]")?;
    let addrs = addrs
        .split(',')
        .map(|a| {
            a.trim()
                .parse::<SocketAddr>()
                .map_err(|_| format!("{a:?} in {s:?} is not an IP:PORT ([v6]:PORT for IPv6)"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((name.to_string(), addrs))
}

/// `CIDR=NAME`, e.g. `203.0.113.0/24=us` (a bare IP means just that address).
pub fn parse_cidr_rule(s: &str) -> Result<(IpNet, String), String> {
    let (net, name) = split_pair(s, "CIDR=NAME")?;
    let net = net
        .parse::<IpNet>()
        .or_else(|_| net.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("{net:?} in {s:?} is not a CIDR (10.0.0.0/8, 2001:db8::/32)"))?;
    Ok((net, name.to_string()))
}

/// `CC=NAME`, e.g. `DE=eu`: a two-letter country code.
pub fn parse_country_rule(s: &str) -> Result<(String, String), String> {
    let (cc, name) = split_pair(s, "CC=NAME")?;
    if cc.len() != 2 || !cc.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(format!(
            "{cc:?} in {s:?} is not a two-letter country code (e.g. DE)"
        ));
    }
    Ok((cc.to_ascii_uppercase(), name.to_string()))
}

fn split_pair<'a>(s: &'a str, expected: &str) -> Result<(&'a str, &'a str), String> {
    match s.split_once('=') {
        Some((l, r)) if !l.trim().is_empty() && !r.trim().is_empty() => Ok((l.trim(), r.trim())),
        _ => Err(format!("expected {expected}, got {s:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn two() -> IngressSpec {
        IngressSpec {
            ingresses: vec![
                ("eu".into(), vec![addr("198.51.100.10:3478")]),
                (
                    "us".into(),
                    vec![addr("203.0.113.10:3478"), addr("[2001:db8::10]:3478")],
                ),
            ],
            ..Default::default()
        }
    }

    fn build(spec: &IngressSpec) -> IngressSelector {
        IngressSelector::from_spec(spec).unwrap().unwrap()
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn flag_values_parse_and_bad_ones_say_what_was_expected() {
        let (name, addrs) = parse_named_addrs("us=203.0.113.10:3478, [2001:db8::10]:3478").unwrap();
        assert_eq!(name, "us");
        assert_eq!(addrs.len(), 2);
        assert!(parse_named_addrs("us").unwrap_err().contains("NAME=ADDR"));
        assert!(parse_named_addrs("us=203.0.113.10")
            .unwrap_err()
            .contains("IP:PORT"));
        assert_eq!(
            parse_cidr_rule("10.1.0.0/16=eu").unwrap(),
            ("10.1.0.0/16".parse().unwrap(), "eu".to_string())
        );
        assert_eq!(parse_cidr_rule("::1=eu").unwrap().0.prefix_len(), 128);
        assert!(parse_cidr_rule("10.1.0.0/33=eu")
            .unwrap_err()
            .contains("not a CIDR"));
        assert_eq!(parse_country_rule("de=eu").unwrap().0, "DE");
        assert!(parse_country_rule("GER=eu").is_err());
        assert!(parse_country_rule("=eu").is_err());
    }

    #[test]
    fn nothing_configured_is_direct_mode_and_rules_without_a_map_are_errors() {
        assert!(IngressSelector::from_spec(&IngressSpec::default())
            .unwrap()
            .is_none());
        let spec = IngressSpec {
            cidrs: vec![("10.0.0.0/8".parse().unwrap(), "eu".into())],
            ..Default::default()
        };
        assert_eq!(
            IngressSelector::from_spec(&spec).unwrap_err(),
            IngressError::NoIngressMap("--ingress-cidr")
        );
    }

    #[test]
    fn tcp_addresses_default_to_the_udp_ones_and_can_be_overridden() {
        let mut spec = two();
        let s = build(&spec);
        assert_eq!(s.ingress(1).tcp, s.ingress(1).udp);
        spec.tcp_overrides = vec![("US".into(), vec![addr("203.0.113.10:443")])];
        let s = build(&spec);
        assert_eq!(s.ingress(1).tcp, vec![addr("203.0.113.10:443")]);
        assert_eq!(s.ingress(0).tcp, vec![addr("198.51.100.10:3478")]);
        spec.tcp_overrides
            .push(("ap".into(), vec![addr("192.0.2.1:443")]));
        assert!(matches!(
            IngressSelector::from_spec(&spec).unwrap_err(),
            IngressError::UnknownIngress {
                flag: "--ingress-tcp",
                ..
            }
        ));
    }

    #[test]
    fn validation_names_the_bad_flag_and_value() {
        let mut spec = two();
        spec.ingresses
            .push(("EU".into(), vec![addr("192.0.2.1:3478")]));
        assert_eq!(
            IngressSelector::from_spec(&spec).unwrap_err(),
            IngressError::DuplicateName("EU".into())
        );
        let mut spec = two();
        spec.ingresses
            .push(("eu west".into(), vec![addr("192.0.2.1:3478")]));
        assert!(matches!(
            IngressSelector::from_spec(&spec).unwrap_err(),
            IngressError::BadName(_)
        ));
        let mut spec = two();
        spec.cidrs = vec![("10.0.0.0/8".parse().unwrap(), "ap".into())];
        let err = IngressSelector::from_spec(&spec).unwrap_err().to_string();
        assert!(
            err.contains("--ingress-cidr")
                && err.contains("10.0.0.0/8=ap")
                && err.contains("\"ap\""),
            "{err}"
        );
        let mut spec = two();
        spec.cidrs = vec![
            ("10.0.0.0/8".parse().unwrap(), "eu".into()),
            ("10.1.2.3/8".parse().unwrap(), "us".into()),
        ];
        assert!(matches!(
            IngressSelector::from_spec(&spec).unwrap_err(),
            IngressError::DuplicateRule {
                flag: "--ingress-cidr",
                ..
            }
        ));
        let mut spec = two();
        spec.default = Some("ap".into());
        assert!(matches!(
            IngressSelector::from_spec(&spec).unwrap_err(),
            IngressError::UnknownIngress {
                flag: "--ingress-default",
                ..
            }
        ));
    }

    #[test]
    fn header_rules_must_be_complete_and_consistent() {
        let mut spec = two();
        spec.countries = vec![("DE".into(), "eu".into())];
        assert_eq!(
            IngressSelector::from_spec(&spec).unwrap_err(),
            IngressError::CountryWithoutHeader
        );
        let mut spec = two();
        spec.header_mode = Some(HeaderMode::Name);
        assert_eq!(
            IngressSelector::from_spec(&spec).unwrap_err(),
            IngressError::ModeWithoutHeader
        );
        let mut spec = two();
        spec.header = Some("CF-IPCountry".into());
        assert!(matches!(
            IngressSelector::from_spec(&spec).unwrap_err(),
            IngressError::HeaderWithoutCountries(_)
        ));
        spec.countries = vec![("DE".into(), "eu".into()), ("de".into(), "us".into())];
        assert!(matches!(
            IngressSelector::from_spec(&spec).unwrap_err(),
            IngressError::DuplicateRule {
                flag: "--ingress-country",
                ..
            }
        ));
        spec.countries = vec![("DE".into(), "ap".into())];
        assert!(matches!(
            IngressSelector::from_spec(&spec).unwrap_err(),
            IngressError::UnknownIngress {
                flag: "--ingress-country",
                ..
            }
        ));
        spec.countries = vec![("DE".into(), "eu".into())];
        spec.header_mode = Some(HeaderMode::Name);
        assert_eq!(
            IngressSelector::from_spec(&spec).unwrap_err(),
            IngressError::CountryInNameMode
        );
        spec.header = Some("bad header".into());
        spec.countries.clear();
        assert!(matches!(
            IngressSelector::from_spec(&spec).unwrap_err(),
            IngressError::BadHeader(_)
        ));
    }

    #[test]
    fn header_then_cidr_then_default() {
        let mut spec = two();
        spec.header = Some("CF-IPCountry".into());
        spec.countries = vec![("DE".into(), "eu".into()), ("US".into(), "us".into())];
        spec.cidrs = vec![("192.0.2.0/24".parse().unwrap(), "us".into())];
        spec.default = Some("eu".into());
        let s = build(&spec);
        let pick = |h: Option<&str>, c: Option<IpAddr>| {
            let sel = s.select(h, c);
            (
                &*s.ingress(sel.index).name,
                sel.reason,
                sel.header_unmatched,
            )
        };
        assert_eq!(
            pick(Some("us"), ip("192.0.2.9")),
            ("us", Reason::Header, false)
        );
        assert_eq!(
            pick(Some(" DE "), ip("192.0.2.9")),
            ("eu", Reason::Header, false)
        );
        // An unknown country falls through to the CIDR rule, and says so.
        assert_eq!(
            pick(Some("FR"), ip("192.0.2.9")),
            ("us", Reason::Cidr, true)
        );
        assert_eq!(pick(None, ip("192.0.2.9")), ("us", Reason::Cidr, false));
        assert_eq!(
            pick(Some("XX"), ip("198.51.100.1")),
            ("eu", Reason::Default, true)
        );
        assert_eq!(pick(None, None), ("eu", Reason::Default, false));
    }

    #[test]
    fn name_mode_matches_ingress_names_case_insensitively() {
        let mut spec = two();
        spec.header = Some("X-Voxgate-Ingress-Hint".into());
        spec.header_mode = Some(HeaderMode::Name);
        let s = build(&spec);
        assert_eq!(s.select(Some("US"), None).reason, Reason::Header);
        assert_eq!(s.select(Some("US"), None).index, 1);
        let miss = s.select(Some("ap"), None);
        assert_eq!(
            (miss.index, miss.reason, miss.header_unmatched),
            (0, Reason::Default, true)
        );
    }

    #[test]
    fn longest_prefix_wins_for_both_families_and_mapped_v4() {
        let mut spec = two();
        spec.cidrs = vec![
            ("10.0.0.0/8".parse().unwrap(), "eu".into()),
            ("10.9.0.0/16".parse().unwrap(), "us".into()),
            ("2001:db8::/32".parse().unwrap(), "us".into()),
            ("2001:db8:1::/48".parse().unwrap(), "eu".into()),
        ];
        let s = build(&spec);
        assert_eq!(s.select(None, ip("10.9.1.1")).index, 1);
        assert_eq!(s.select(None, ip("10.8.1.1")).index, 0);
        assert_eq!(s.select(None, ip("::ffff:10.9.1.1")).index, 1, "v4-mapped");
        assert_eq!(s.select(None, ip("2001:db8:1::5")).index, 0);
        assert_eq!(s.select(None, ip("2001:db8:2::5")).index, 1);
        assert_eq!(s.select(None, ip("2001:db9::5")).reason, Reason::Default);
    }
}
