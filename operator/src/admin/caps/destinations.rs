//! Which hosts and addresses benchmarks may load: the admin's allow and deny lists and the
//! API server's addresses. Pure: a host, the addresses it resolved to and the policy become Ok
//! or the refusal's message.
//!
//! A list holds CIDRs ("10.0.0.0/8"), single addresses, and host-name patterns: "*" (any name),
//! "*.example.com" (any name below example.com) or an exact name. Patterns match names only,
//! never an address written in the URL. Deny wins over allow.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::admin::allow::list_items;

/// An allow or deny list, parsed from a comma-separated flag.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TargetList {
    nets: Vec<IpNet>,
    hosts: Vec<String>,
}

impl std::str::FromStr for TargetList {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut list = TargetList::default();
        for entry in list_items(text) {
            if entry.contains('/') {
                let net: IpNet = entry
                    .parse()
                    .map_err(|e| format!("target list entry {entry:?}: {e}"))?;
                list.nets.push(net.trunc());
            } else if let Ok(ip) = entry.parse::<IpAddr>() {
                list.nets.push(IpNet::from(normalize(ip)));
            } else {
                list.hosts.push(host_pattern(entry)?);
            }
        }
        Ok(list)
    }
}

impl fmt::Display for TargetList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nets = self.nets.iter().map(ToString::to_string);
        let all: Vec<String> = nets.chain(self.hosts.iter().cloned()).collect();
        if all.is_empty() {
            return f.write_str("(none)");
        }
        f.write_str(&all.join(", "))
    }
}

/// A host-name pattern, lower-case without a trailing dot; Err names the bad entry.
fn host_pattern(entry: &str) -> Result<String, String> {
    let p = entry.trim_end_matches('.').to_ascii_lowercase();
    let name = p.strip_prefix("*.").unwrap_or(&p);
    let valid_name = !name.is_empty()
        && name.len() <= 253
        && name
            .split('.')
            .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    if p == "*" || valid_name {
        Ok(p)
    } else {
        Err(format!(
            "target list entry {entry:?} is neither a CIDR, an IP address nor a host pattern (\"*\", \"*.example.com\", \"name.example.com\")"
        ))
    }
}

fn pattern_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_prefix('*') {
        Some("") => true,
        Some(suffix) => name.ends_with(suffix) && name.len() > suffix.len(),
        None => pattern == name,
    }
}

/// IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) reach the IPv4 address: judge them as such.
pub fn normalize(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

impl TargetList {
    fn net_of(&self, ip: IpAddr) -> Option<&IpNet> {
        self.nets.iter().find(|n| n.contains(&ip))
    }
    fn pattern_of(&self, name: &str) -> Option<&str> {
        self.hosts
            .iter()
            .map(String::as_str)
            .find(|p| pattern_matches(p, name))
    }
}

/// What decides whether a target may be loaded.
pub struct Policy<'a> {
    pub allowed: &'a TargetList,
    pub denied: &'a TargetList,
    /// The API server's ClusterIPs and endpoint addresses (empty when not denied).
    pub api_server: Vec<IpAddr>,
}

/// A target as written (`field` and `value` name it in messages) and what its host resolved to.
pub struct Target<'a> {
    pub field: &'a str,
    pub value: &'a str,
    /// The host name, lower-case without a trailing dot; None for an address literal.
    pub name: Option<&'a str>,
    pub addresses: &'a [IpAddr],
}

impl Policy<'_> {
    /// Ok when no address of the target is denied and the target is allowed: by its name, or
    /// with every address inside an allowed CIDR. Err is the refusal's message.
    pub fn check(&self, t: &Target<'_>) -> Result<(), String> {
        let prefix = format!("{} {}", t.field, t.value);
        let from = t
            .name
            .map(|n| format!(" ({n} resolves to it)"))
            .unwrap_or_default();
        if t.addresses.is_empty() {
            return Err(format!("{prefix}: the host resolves to no address"));
        }
        if let Some(p) = t.name.and_then(|n| self.denied.pattern_of(n)) {
            return Err(format!(
                "{prefix}: the host matches {p}, which the cluster admin denies (Helm value targets.denied)"
            ));
        }
        for ip in t.addresses.iter().copied().map(normalize) {
            if self.api_server.iter().any(|a| normalize(*a) == ip) {
                return Err(format!(
                    "{prefix}: {ip}{from} is an address of the Kubernetes API server, which benchmarks may not load (Helm value targets.denyApiServer)"
                ));
            }
            if let Some(net) = self.denied.net_of(ip) {
                return Err(format!(
                    "{prefix}: {ip}{from} is inside {net}, which the cluster admin denies (Helm value targets.denied)"
                ));
            }
        }
        if t.name.and_then(|n| self.allowed.pattern_of(n)).is_some() {
            return Ok(());
        }
        for ip in t.addresses.iter().copied().map(normalize) {
            if self.allowed.net_of(ip).is_none() {
                return Err(format!(
                    "{prefix}: {ip}{from} is not among the targets the cluster admin allows: {} (Helm value targets.allowed)",
                    self.allowed
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::config::Config;

    fn list(s: &str) -> TargetList {
        s.parse().unwrap()
    }

    fn ips(s: &[&str]) -> Vec<IpAddr> {
        s.iter().map(|a| a.parse().unwrap()).collect()
    }

    fn check(p: &Policy<'_>, name: Option<&str>, addrs: &[&str]) -> Result<(), String> {
        let addresses = ips(addrs);
        p.check(&Target {
            field: "target.url",
            value: "http://t/",
            name,
            addresses: &addresses,
        })
    }

    #[test]
    fn lists_parse_cidrs_addresses_and_patterns() {
        let l = list(" 10.0.0.0/8, 192.0.2.7 ,fd00::/8, *.svc.cluster.local, Example.COM. ");
        assert_eq!(
            l.to_string(),
            "10.0.0.0/8, 192.0.2.7/32, fd00::/8, *.svc.cluster.local, example.com"
        );
        assert_eq!(list("").to_string(), "(none)");
        // host bits are dropped: 10.1.2.3/8 means 10.0.0.0/8
        assert_eq!(list("10.1.2.3/8"), list("10.0.0.0/8"));
        for bad in [
            "10.0.0.0/33",
            "a b",
            "*.*",
            "x.*",
            "a..b",
            "*foo",
            "1.2.3.4/x",
        ] {
            assert!(bad.parse::<TargetList>().is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn patterns_match_names_below_a_suffix_or_exactly() {
        assert!(pattern_matches("*", "anything"));
        assert!(pattern_matches("*.svc", "a.b.svc"));
        assert!(!pattern_matches("*.svc", "svc"));
        assert!(!pattern_matches("*.svc", "asvc"));
        assert!(pattern_matches("web.example", "web.example"));
        assert!(!pattern_matches("web.example", "x.web.example"));
    }

    #[test]
    fn defaults_allow_cluster_targets_and_deny_metadata_loopback_and_the_api_server() {
        let caps = Config::for_tests().caps;
        let p = Policy {
            allowed: &caps.allowed_targets,
            denied: &caps.denied_targets,
            api_server: ips(&["198.19.64.1", "198.19.255.1"]),
        };
        assert_eq!(check(&p, Some("nginx.ns.svc"), &["198.19.64.20"]), Ok(()));
        assert_eq!(check(&p, None, &["198.18.20.2"]), Ok(()));
        assert_eq!(check(&p, None, &["2001:db8::1"]), Ok(()));
        assert_eq!(
            check(&p, None, &["169.254.169.254"]).unwrap_err(),
            "target.url http://t/: 169.254.169.254 is inside 169.254.0.0/16, which the cluster admin denies (Helm value targets.denied)"
        );
        assert_eq!(
            check(&p, Some("kubernetes.default.svc"), &["198.19.64.1"]).unwrap_err(),
            "target.url http://t/: 198.19.64.1 (kubernetes.default.svc resolves to it) is an address of the Kubernetes API server, which benchmarks may not load (Helm value targets.denyApiServer)"
        );
        // The API server's endpoint, and any denied address among several.
        assert!(check(&p, Some("x"), &["198.19.64.20", "198.19.255.1"]).is_err());
        for denied in [
            "127.0.0.1",
            "::1",
            "0.0.0.0",
            "::",
            "fe80::1",
            "::ffff:169.254.169.254",
            "::ffff:127.0.0.1",
        ] {
            assert!(check(&p, None, &[denied]).is_err(), "{denied} allowed");
        }
    }

    #[test]
    fn narrowed_allow_lists_and_denied_names() {
        let allowed = list("198.18.0.0/15, *.svc.cluster.local");
        let denied = list("169.254.0.0/16, metadata.google.internal");
        let p = Policy {
            allowed: &allowed,
            denied: &denied,
            api_server: vec![],
        };
        assert_eq!(check(&p, None, &["198.19.1.1"]), Ok(()));
        assert_eq!(
            check(&p, Some("web.team.svc.cluster.local"), &["10.9.9.9"]),
            Ok(())
        );
        assert_eq!(
            check(&p, Some("example.org"), &["192.0.2.1"]).unwrap_err(),
            "target.url http://t/: 192.0.2.1 (example.org resolves to it) is not among the targets the cluster admin allows: 198.18.0.0/15, *.svc.cluster.local (Helm value targets.allowed)"
        );
        assert!(check(&p, None, &["198.19.1.1", "192.0.2.1"]).is_err());
        // A pattern allows names, never the address literal; deny beats allow.
        assert!(check(&p, Some("metadata.google.internal"), &["198.19.1.1"])
            .unwrap_err()
            .contains("the host matches metadata.google.internal"));
        assert!(check(&p, Some("evil.svc.cluster.local"), &["169.254.169.254"]).is_err());
        assert!(check(&p, Some("a.svc.cluster.local"), &[])
            .unwrap_err()
            .contains("resolves to no address"));
        let nothing = TargetList::default();
        let closed = Policy {
            allowed: &nothing,
            denied: &nothing,
            api_server: vec![],
        };
        assert!(check(&closed, Some("x"), &["198.19.1.1"])
            .unwrap_err()
            .contains("allows: (none)"));
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    fn any_ip() -> impl Strategy<Value = IpAddr> {
        prop_oneof![
            any::<[u8; 4]>().prop_map(IpAddr::from),
            any::<[u8; 16]>().prop_map(IpAddr::from),
            // IPv4-mapped IPv6 and the usual suspects
            any::<[u8; 4]>()
                .prop_map(|v4| IpAddr::V6(std::net::Ipv4Addr::from(v4).to_ipv6_mapped())),
            Just(IpAddr::from([169, 254, 169, 254])),
            Just(IpAddr::from([127, 0, 0, 1])),
        ]
    }

    fn any_entry() -> impl Strategy<Value = String> {
        prop_oneof![
            (any_ip(), 0u8..140).prop_map(|(ip, len)| format!("{ip}/{len}")),
            any_ip().prop_map(|ip| ip.to_string()),
            "[*]?[.]?[a-z0-9.-]{0,20}",
            ".{0,30}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any flag text parses or fails with a message; it never panics.
        #[test]
        fn any_list_text_parses_or_fails_cleanly(text in ".{0,200}") {
            let _ = text.parse::<TargetList>();
        }

        /// Never panics, and Ok means no address is denied and each is allowed (by name or net).
        #[test]
        fn admitted_targets_avoid_the_deny_list(
            allowed in proptest::collection::vec(any_entry(), 0..6),
            denied in proptest::collection::vec(any_entry(), 0..6),
            api_server in proptest::collection::vec(any_ip(), 0..3),
            name in proptest::option::of("[a-z0-9.-]{1,30}"),
            addresses in proptest::collection::vec(any_ip(), 0..5),
        ) {
            let parse = |entries: Vec<String>| -> TargetList {
                entries.iter().filter_map(|e| e.parse().ok()).fold(TargetList::default(), |mut acc, l: TargetList| {
                    acc.nets.extend(l.nets);
                    acc.hosts.extend(l.hosts);
                    acc
                })
            };
            let (allowed, denied) = (parse(allowed), parse(denied));
            let policy = Policy { allowed: &allowed, denied: &denied, api_server: api_server.clone() };
            let target = Target { field: "f", value: "v", name: name.as_deref(), addresses: &addresses };
            if policy.check(&target).is_ok() {
                prop_assert!(!addresses.is_empty());
                let by_name = name.as_deref().and_then(|n| allowed.pattern_of(n)).is_some();
                prop_assert!(name.as_deref().and_then(|n| denied.pattern_of(n)).is_none());
                for ip in addresses.iter().copied().map(normalize) {
                    prop_assert!(!api_server.iter().any(|a| normalize(*a) == ip));
                    prop_assert!(denied.net_of(ip).is_none());
                    prop_assert!(by_name || allowed.net_of(ip).is_some());
                }
            }
        }
    }
}
