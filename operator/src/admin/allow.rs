//! The cluster admin's allow-lists for privileged actions (operator flags, Helm values):
//! offload interfaces and features (globs), the nodes offload Jobs may run on (a label
//! selector), and sweep pairs (benchmark namespace -> target namespace and name). Every list
//! allows nothing when empty; parsing never fails on odd input, it just matches less.

use std::collections::BTreeMap;

/// `*` matches any run of characters (also none); everything else matches itself.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((prefix, rest)) => {
            let Some(tail) = text.strip_prefix(prefix) else {
                return false;
            };
            tail.char_indices()
                .map(|(i, _)| i)
                .chain([tail.len()])
                .any(|i| tail.get(i..).is_some_and(|t| glob_match(rest, t)))
        }
    }
}

/// The items of a comma-separated list, trimmed, the empty ones left out.
pub fn list_items(text: &str) -> impl Iterator<Item = &str> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// `FromStr` (for clap) of allow-lists whose `parse` takes any text: odd input just matches
/// less.
macro_rules! from_str_by_parse {
    ($($list:ty),+) => {$(
        impl std::str::FromStr for $list {
            type Err = std::convert::Infallible;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Ok(<$list>::parse(s))
            }
        }
    )+};
}
pub(crate) use from_str_by_parse;

from_str_by_parse!(GlobList, NodeSelector, SweepPairs);

/// Comma-separated globs ("vxlan*,nbe-*"); empty allows nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GlobList(Vec<String>);

impl GlobList {
    pub fn parse(text: &str) -> GlobList {
        GlobList(list_items(text).map(String::from).collect())
    }
    pub fn allows(&self, name: &str) -> bool {
        self.0.iter().any(|p| glob_match(p, name))
    }
}

/// One requirement of an equality-based label selector.
#[derive(Clone, Debug, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    Absent(String),
}

/// An equality-based label selector (`key=value`, `key!=value`, `key`, `!key`, comma-separated,
/// all must hold). Unlike Kubernetes, an EMPTY selector selects NO node: the safe default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeSelector(Vec<Requirement>);

impl NodeSelector {
    pub fn parse(text: &str) -> NodeSelector {
        NodeSelector(
            list_items(text)
                .map(|p| {
                    if let Some((k, v)) = p.split_once("!=") {
                        Requirement::NotEquals(k.trim().into(), v.trim().into())
                    } else if let Some((k, v)) = p.split_once('=') {
                        let v = v.strip_prefix('=').unwrap_or(v);
                        Requirement::Equals(k.trim().into(), v.trim().into())
                    } else if let Some(k) = p.strip_prefix('!') {
                        Requirement::Absent(k.trim().into())
                    } else {
                        Requirement::Exists(p.into())
                    }
                })
                .collect(),
        )
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.0.is_empty()
            && self.0.iter().all(|r| match r {
                Requirement::Equals(k, v) => labels.get(k) == Some(v),
                Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
                Requirement::Exists(k) => labels.contains_key(k),
                Requirement::Absent(k) => !labels.contains_key(k),
            })
    }
}

/// Where a sweep pair lets a benchmark's target live.
#[derive(Clone, Debug, PartialEq)]
enum TargetNamespace {
    /// `.`: the benchmark's own namespace.
    Same,
    Glob(String),
}

#[derive(Clone, Debug, PartialEq)]
struct SweepPair {
    benchmark: String,
    target: TargetNamespace,
    name: Option<String>,
}

/// Sweep pairs, comma-separated `BENCHMARK_NS=TARGET_NS[/NAME]`: namespaces and names are
/// globs (`team-*`, `*`), TARGET_NS `.` means the benchmark's own namespace. E.g.
/// `team-a=ingress-nginx/ingress-nginx-controller,team-*=.`. Empty allows no sweep.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SweepPairs(Vec<SweepPair>);

impl SweepPairs {
    pub fn parse(text: &str) -> SweepPairs {
        SweepPairs(
            list_items(text)
                .filter_map(|e| {
                    let (bench, target) = e.split_once('=')?;
                    let (ns, name) = match target.split_once('/') {
                        Some((ns, name)) => (ns.trim(), Some(name.trim().to_string())),
                        None => (target.trim(), None),
                    };
                    let target = match ns {
                        "." => TargetNamespace::Same,
                        glob => TargetNamespace::Glob(glob.to_string()),
                    };
                    Some(SweepPair {
                        benchmark: bench.trim().to_string(),
                        target,
                        name,
                    })
                })
                .collect(),
        )
    }

    /// The old flat list (`--sweep-namespaces a,b`): each may sweep in its own namespace only.
    pub fn same_namespace(namespaces: &str) -> SweepPairs {
        let pairs: Vec<String> = list_items(namespaces).map(|ns| format!("{ns}=.")).collect();
        SweepPairs::parse(&pairs.join(","))
    }

    pub fn extend(&mut self, other: SweepPairs) {
        self.0.extend(other.0);
    }

    /// May a benchmark in `benchmark_ns` sweep `target_ns/name`?
    pub fn allows(&self, benchmark_ns: &str, target_ns: &str, name: &str) -> bool {
        self.0.iter().any(|p| {
            glob_match(&p.benchmark, benchmark_ns)
                && match &p.target {
                    TargetNamespace::Same => target_ns == benchmark_ns,
                    TargetNamespace::Glob(g) => glob_match(g, target_ns),
                }
                && p.name.as_deref().is_none_or(|n| glob_match(n, name))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("nbe-*", "nbe-vx0"));
        assert!(glob_match("*", ""));
        assert!(glob_match("vxlan*", "vxlan.calico"));
        assert!(glob_match("tx-tcp*-segmentation", "tx-tcp6-segmentation"));
        assert!(!glob_match("nbe-*", "eth0"));
        assert!(!glob_match("eth0", "eth01"));
        let l = GlobList::parse("nbe-*, flannel.1");
        assert!(l.allows("flannel.1") && l.allows("nbe-veth0"));
        assert!(!l.allows("eth0"));
        assert!(!GlobList::parse("").allows("eth0"), "empty allows nothing");
    }

    #[test]
    fn node_selectors_select_nothing_when_empty() {
        let labels = BTreeMap::from([
            ("kubernetes.io/hostname".to_string(), "n1".to_string()),
            ("netbench.io/offload".to_string(), "true".to_string()),
        ]);
        assert!(!NodeSelector::parse("").matches(&labels));
        assert!(NodeSelector::parse("netbench.io/offload=true").matches(&labels));
        assert!(NodeSelector::parse("netbench.io/offload==true").matches(&labels));
        assert!(NodeSelector::parse("netbench.io/offload").matches(&labels));
        assert!(!NodeSelector::parse("node-role.kubernetes.io/control-plane").matches(&labels));
        assert!(NodeSelector::parse("!node-role.kubernetes.io/control-plane").matches(&labels));
        assert!(
            !NodeSelector::parse("netbench.io/offload=true,kubernetes.io/hostname!=n1")
                .matches(&labels)
        );
    }

    #[test]
    fn sweep_pairs() {
        let p = SweepPairs::parse("team-a=ingress-nginx/ingress-nginx-controller, team-*=.");
        assert!(p.allows("team-a", "ingress-nginx", "ingress-nginx-controller"));
        assert!(!p.allows("team-a", "ingress-nginx", "other"));
        assert!(!p.allows("team-b", "ingress-nginx", "ingress-nginx-controller"));
        assert!(p.allows("team-b", "team-b", "web"));
        assert!(
            !p.allows("team-b", "team-a", "web"),
            "another team's namespace"
        );
        assert!(!SweepPairs::parse("").allows("a", "a", "x"));
        assert!(!SweepPairs::parse("garbage").allows("garbage", "garbage", "x"));
        let old = SweepPairs::same_namespace("a, b");
        assert!(old.allows("b", "b", "web") && !old.allows("a", "b", "web"));
        let star = SweepPairs::same_namespace("*");
        assert!(star.allows("x", "x", "web") && !star.allows("x", "y", "web"));
    }

    /// Odd input never panics and a literal pattern matches only itself.
    #[test]
    fn odd_input_is_harmless() {
        let samples = [
            "",
            "*",
            "**",
            "=",
            "=/",
            "a=",
            "=b",
            "a=b/",
            "!",
            "!=",
            "a!=",
            "é*",
            "*é",
            "a,,b",
            ".",
            "./x",
            "k==v",
            " , ",
            "a*b*c",
            "ñ=ñ/ñ*",
        ];
        for list in samples {
            for a in samples {
                let _ = GlobList::parse(list).allows(a);
                let labels = BTreeMap::from([(a.to_string(), list.to_string())]);
                let _ = NodeSelector::parse(list).matches(&labels);
                let _ = SweepPairs::parse(list).allows(a, list, a);
                if !a.contains('*') && !list.contains('*') {
                    assert_eq!(glob_match(a, list), a == list, "{a:?} {list:?}");
                }
            }
        }
    }
}
