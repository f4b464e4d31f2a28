//! The typed values of configuration keys: [`HostPort`], [`Listener`], [`QuorumVoter`],
//! [`CoreSet`], [`ProcessRole`]. Each parses from the text a properties file holds and prints
//! back to text that parses to the same value; a value that does not parse is a
//! [`ValueError`] saying which item of it is wrong and why.

use std::fmt;
use std::str::FromStr;

use corum_types::{NodeId, Uuid};

use crate::error::ValueError;

/// What a node does. Only `controller` exists so far; `broker` (KIP-631's combined mode) is
/// named so the error for it can say it is not supported yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProcessRole {
    Controller,
}

impl fmt::Display for ProcessRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProcessRole::Controller => f.write_str("controller"),
        }
    }
}

/// Parses `process.roles`: a non-empty list of distinct roles.
pub fn parse_roles(s: &str) -> Result<Vec<ProcessRole>, ValueError> {
    let mut roles = Vec::new();
    for r in list_items(s) {
        let role = match r.to_ascii_lowercase().as_str() {
            "controller" => ProcessRole::Controller,
            "broker" => return Err(ValueError::BrokerRole),
            _ => return Err(ValueError::UnknownRole { role: r.to_owned() }),
        };
        if roles.contains(&role) {
            return Err(ValueError::Twice {
                what: "role",
                item: r.to_owned(),
            });
        }
        roles.push(role);
    }
    if roles.is_empty() {
        return Err(ValueError::Empty {
            expected: "set process.roles=controller",
        });
    }
    Ok(roles)
}

/// Whether `host` names no machine: empty, `0.0.0.0` or `::` ("every interface"), bracketed
/// or not.
pub fn is_wildcard_host(host: &str) -> bool {
    let host = host.trim_matches(['[', ']']);
    host.is_empty() || host == "0.0.0.0" || host == "::"
}

/// A host and a port. IPv6 literals are written in brackets (`[::1]:9093`) and stored without.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostPort {
    pub host: String,
    pub port: u16,
}

impl HostPort {
    /// Whether the host names no machine ([`is_wildcard_host`]).
    pub fn is_wildcard(&self) -> bool {
        is_wildcard_host(&self.host)
    }

    /// Parses `host:port` or `[v6]:port`. The host may be empty only if `allow_empty_host`
    /// (Kafka's listeners use an empty host for "every interface").
    fn parse_with(s: &str, allow_empty_host: bool) -> Result<Self, ValueError> {
        let s = s.trim();
        let text = || s.to_owned();
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (host, after) = rest.split_once(']').ok_or_else(|| ValueError::Malformed {
                text: text(),
                expected: "']' after an IPv6 address",
            })?;
            let port = after
                .strip_prefix(':')
                .ok_or_else(|| ValueError::Malformed {
                    text: text(),
                    expected: "':PORT' after ']'",
                })?;
            (host, port)
        } else {
            s.rsplit_once(':').ok_or_else(|| ValueError::Malformed {
                text: text(),
                expected: "HOST:PORT",
            })?
        };
        if host.is_empty() && !allow_empty_host {
            return Err(ValueError::EmptyHost { text: text() });
        }
        if host.contains(|c: char| c.is_whitespace() || c == '/' || c == '@' || c == ',') {
            return Err(ValueError::InvalidHost { text: text() });
        }
        if !s.starts_with('[') && host.contains(':') {
            return Err(ValueError::UnbracketedIpv6 { text: text() });
        }
        let port = port
            .parse::<u16>()
            .map_err(|_| ValueError::InvalidPort { text: text() })?;
        Ok(HostPort {
            host: host.to_owned(),
            port,
        })
    }
}

impl FromStr for HostPort {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Self, ValueError> {
        HostPort::parse_with(s, false)
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// One entry of `listeners`: `NAME://HOST:PORT`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Listener {
    pub name: String,
    pub endpoint: HostPort,
}

impl FromStr for Listener {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Self, ValueError> {
        let s = s.trim();
        let (name, rest) = s.split_once("://").ok_or_else(|| ValueError::Malformed {
            text: s.to_owned(),
            expected: "NAME://HOST:PORT",
        })?;
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(ValueError::ListenerName { text: s.to_owned() });
        }
        Ok(Listener {
            name: name.to_ascii_uppercase(),
            endpoint: HostPort::parse_with(rest, true)?,
        })
    }
}

impl fmt::Display for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.name, self.endpoint)
    }
}

/// Parses `listeners`: a non-empty list of listeners with distinct names.
pub fn parse_listeners(s: &str) -> Result<Vec<Listener>, ValueError> {
    let ls = list_items(s)
        .map(Listener::from_str)
        .collect::<Result<Vec<_>, _>>()?;
    if ls.is_empty() {
        return Err(ValueError::Empty {
            expected: "at least one listener is needed",
        });
    }
    for (i, l) in ls.iter().enumerate() {
        if ls[..i].iter().any(|m| m.name == l.name) {
            return Err(ValueError::Twice {
                what: "listener name",
                item: l.name.clone(),
            });
        }
    }
    Ok(ls)
}

/// One voter of `controller.quorum.voters` (`ID@HOST:PORT`) or of `--initial-controllers`
/// (`ID@HOST:PORT:DIRECTORY_ID`, KIP-853).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QuorumVoter {
    pub id: NodeId,
    pub endpoint: HostPort,
    /// The voter's directory id (replica UUID), when given.
    pub directory_id: Option<Uuid>,
}

impl FromStr for QuorumVoter {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Self, ValueError> {
        let s = s.trim();
        let text = || s.to_owned();
        let malformed = || ValueError::Malformed {
            text: text(),
            expected: "ID@HOST:PORT[:DIRECTORY_ID]",
        };
        let (id, rest) = s.split_once('@').ok_or_else(malformed)?;
        let id = id
            .parse::<NodeId>()
            .map_err(|_| ValueError::NodeId { text: text() })?;
        // Either HOST:PORT or HOST:PORT:DIRID; a bracketed IPv6 host hides its own colons.
        let tail_start = if rest.starts_with('[') {
            rest.find(']').map(|i| i + 1).unwrap_or(0)
        } else {
            0
        };
        let colons: Vec<usize> = rest[tail_start..]
            .match_indices(':')
            .map(|(i, _)| i + tail_start)
            .collect();
        let (endpoint, directory_id) = match colons.len() {
            1 => (rest, None),
            2 => {
                let (ep, dir) = rest.split_at(colons[1]);
                let dir = &dir[1..];
                let uuid = dir
                    .parse::<Uuid>()
                    .map_err(|_| ValueError::DirectoryId { text: text() })?;
                if uuid.is_zero() {
                    return Err(ValueError::ZeroDirectoryId { text: text() });
                }
                (ep, Some(uuid))
            }
            _ => return Err(malformed()),
        };
        let endpoint: HostPort = endpoint.parse()?;
        if endpoint.port == 0 {
            return Err(ValueError::VoterPortZero { text: text() });
        }
        Ok(QuorumVoter {
            id,
            endpoint,
            directory_id,
        })
    }
}

impl fmt::Display for QuorumVoter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.id, self.endpoint)?;
        if let Some(d) = self.directory_id {
            write!(f, ":{d}")?;
        }
        Ok(())
    }
}

/// Parses a comma-separated voter list and checks that ids are unique.
pub fn parse_voters(s: &str) -> Result<Vec<QuorumVoter>, ValueError> {
    let voters = list_items(s)
        .map(QuorumVoter::from_str)
        .collect::<Result<Vec<_>, _>>()?;
    for (i, v) in voters.iter().enumerate() {
        if voters[..i].iter().any(|w| w.id == v.id) {
            return Err(ValueError::Twice {
                what: "voter id",
                item: v.id.to_string(),
            });
        }
    }
    Ok(voters)
}

/// A set of CPU cores, written `0-3,6` (ranges and single cores, like `taskset -c`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CoreSet(pub Vec<u32>);

/// The highest core number a [`CoreSet`] accepts.
pub const CORE_MAX: u32 = 4095;

impl FromStr for CoreSet {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Self, ValueError> {
        let mut cores = Vec::new();
        for item in list_items(s) {
            let (lo, hi) = match item.split_once('-') {
                Some((lo, hi)) => (lo.trim(), hi.trim()),
                None => (item, item),
            };
            let core = |text: &str| {
                text.parse::<u32>().map_err(|_| ValueError::Core {
                    text: text.to_owned(),
                })
            };
            let (lo, hi) = (core(lo)?, core(hi)?);
            if lo > hi {
                return Err(ValueError::CoreRangeBackwards {
                    text: item.to_owned(),
                });
            }
            if hi > CORE_MAX {
                return Err(ValueError::CoreTooHigh {
                    core: hi,
                    max: CORE_MAX,
                });
            }
            cores.extend(lo..=hi);
        }
        if cores.is_empty() {
            return Err(ValueError::Empty {
                expected: "name at least one core, or leave the value empty",
            });
        }
        cores.sort_unstable();
        cores.dedup();
        Ok(CoreSet(cores))
    }
}

impl fmt::Display for CoreSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Print maximal runs as ranges so the text parses back to the same set.
        let mut i = 0;
        let mut first = true;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

/// The items of a comma-separated list, trimmed, empty ones skipped.
pub(crate) fn list_items(s: &str) -> impl Iterator<Item = &str> {
    s.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// Items printed as a comma-separated list.
/// A listener's security protocol (`listener.security.protocol.map`), Kafka's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's code for the protocol (as carried in registrations).
    pub fn code(self) -> i16 {
        match self {
            SecurityProtocol::Plaintext => 0,
            SecurityProtocol::Ssl => 1,
            SecurityProtocol::SaslPlaintext => 2,
            SecurityProtocol::SaslSsl => 3,
        }
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        })
    }
}

impl FromStr for SecurityProtocol {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Self, ValueError> {
        match s.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(SecurityProtocol::Plaintext),
            "SSL" => Ok(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Ok(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Ok(SecurityProtocol::SaslSsl),
            _ => Err(ValueError::Malformed {
                text: s.trim().to_owned(),
                expected: "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
            }),
        }
    }
}

/// `NAME:PROTOCOL,...` (`listener.security.protocol.map`), each name once.
pub fn parse_protocol_map(s: &str) -> Result<Vec<(String, SecurityProtocol)>, ValueError> {
    let mut out: Vec<(String, SecurityProtocol)> = Vec::new();
    for item in list_items(s) {
        let (name, protocol) = item.split_once(':').ok_or_else(|| ValueError::Malformed {
            text: item.to_owned(),
            expected: "NAME:PROTOCOL",
        })?;
        let name = name.trim().to_ascii_uppercase();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(ValueError::ListenerName {
                text: item.to_owned(),
            });
        }
        if out.iter().any(|(n, _)| *n == name) {
            return Err(ValueError::Twice {
                what: "listener name",
                item: name,
            });
        }
        out.push((name, protocol.parse()?));
    }
    Ok(out)
}

pub(crate) fn join<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `listener.security.protocol.map`: names upper-cased, Kafka's four protocols, each name
    /// once, a clear error for anything else.
    #[test]
    fn protocol_maps() {
        assert_eq!(
            parse_protocol_map("kafka:plaintext, SECURE:SASL_SSL").unwrap(),
            vec![
                ("KAFKA".to_owned(), SecurityProtocol::Plaintext),
                ("SECURE".to_owned(), SecurityProtocol::SaslSsl)
            ]
        );
        assert_eq!(SecurityProtocol::SaslPlaintext.code(), 2);
        assert!(matches!(
            parse_protocol_map("KAFKA"),
            Err(ValueError::Malformed { .. })
        ));
        assert!(matches!(
            parse_protocol_map("KAFKA:TLS"),
            Err(ValueError::Malformed { .. })
        ));
        assert!(matches!(
            parse_protocol_map("A:SSL,a:SSL"),
            Err(ValueError::Twice { .. })
        ));
        assert!(matches!(
            parse_protocol_map("A-B:SSL"),
            Err(ValueError::ListenerName { .. })
        ));
    }

    /// KIP-853 voters carry a directory id that prints back the same way.
    #[test]
    fn voters_with_directory_ids() {
        let dir = Uuid([9; 16]);
        let text = format!("1@h1:9093:{dir},2@[::1]:9094:{dir},3@h3:9095");
        let v = parse_voters(&text).unwrap();
        assert_eq!(v[0].directory_id, Some(dir));
        assert_eq!(v[1].endpoint.host, "::1");
        assert_eq!(v[2].directory_id, None);
        assert_eq!(join(&v), text);
    }

    /// Listener names are upper-cased, an empty host means every interface, and an IPv6 host
    /// prints back in brackets.
    #[test]
    fn listeners_parse_and_print() {
        let ls = parse_listeners("controller://:9093, CLIENT://[::1]:9094").unwrap();
        assert_eq!(ls[0].name, "CONTROLLER");
        assert_eq!(ls[0].endpoint.host, "");
        assert_eq!(ls[1].to_string(), "CLIENT://[::1]:9094");
        assert_eq!(
            "h".parse::<HostPort>(),
            Err(ValueError::Malformed {
                text: "h".into(),
                expected: "HOST:PORT"
            })
        );
        assert_eq!(
            ":1".parse::<HostPort>(),
            Err(ValueError::EmptyHost { text: ":1".into() })
        );
    }

    proptest! {
        /// Core sets print as ranges that parse back to the same set.
        #[test]
        fn core_set_round_trip(mut cores in proptest::collection::vec(0u32..64, 1..20)) {
            cores.sort_unstable();
            cores.dedup();
            let set = CoreSet(cores);
            prop_assert_eq!(set.to_string().parse::<CoreSet>().unwrap(), set);
        }
    }
}
