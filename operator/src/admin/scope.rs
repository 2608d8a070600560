//! Where the operator looks for benchmarks: every namespace (a cluster-wide install), or only
//! the namespaces the admin listed (`--watch-namespaces`, Helm `watchNamespaces`: the operator
//! then holds Roles in those namespaces instead of cluster-wide rights to pods and Services, and
//! never lists anything namespaced across the cluster).

use kube::api::{Api, ListParams};
use kube::core::NamespaceResourceScope;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use crate::admin::allow::list_items;

/// At most this many watched namespaces: each costs two watches per kind.
pub const MAX_WATCHED: usize = 64;

/// The namespaces the operator watches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace.
    #[default]
    Cluster,
    /// Only these (distinct, sorted, at least one).
    Namespaces(Vec<String>),
}

impl Scope {
    /// From the admin's comma-separated list: empty = every namespace. Exact names only (a
    /// watch cannot follow a glob); refused with the reason otherwise.
    pub fn parse(text: &str) -> Result<Scope, String> {
        let mut names: Vec<String> = list_items(text).map(String::from).collect();
        if names.is_empty() {
            return Ok(Scope::Cluster);
        }
        if let Some(bad) = names.iter().find(|n| !is_namespace_name(n)) {
            return Err(format!(
                "watch namespace {bad:?} is not a namespace name (lowercase letters, digits and \
                 '-', at most 63; globs cannot be watched: list each namespace)"
            ));
        }
        names.sort();
        names.dedup();
        if names.len() > MAX_WATCHED {
            return Err(format!(
                "{} watch namespaces: at most {MAX_WATCHED} (or none, to watch every namespace)",
                names.len()
            ));
        }
        Ok(Scope::Namespaces(names))
    }

    /// Whether benchmarks in `namespace` are the operator's to run.
    pub fn covers(&self, namespace: &str) -> bool {
        match self {
            Scope::Cluster => true,
            Scope::Namespaces(names) => names.iter().any(|n| n == namespace),
        }
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self, Scope::Cluster)
    }

    /// One API handle per place to watch or list: the whole cluster, or each namespace.
    pub fn apis<K>(&self, client: &Client) -> Vec<Api<K>>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match self {
            Scope::Cluster => vec![Api::all(client.clone())],
            Scope::Namespaces(names) => names
                .iter()
                .map(|ns| Api::namespaced(client.clone(), ns))
                .collect(),
        }
    }

    /// Every object of kind `K` in scope (one list per namespace when namespaced). A watched
    /// namespace that refuses the list (403: its Role is gone; 404) is left out, named in
    /// `Listed::skipped`, so one namespace cannot stop the others; a cluster-wide list, and any
    /// other error, fails.
    pub async fn list<K>(&self, client: &Client, lp: &ListParams) -> Result<Listed<K>, kube::Error>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let mut listed = Listed {
            items: vec![],
            skipped: vec![],
        };
        let Scope::Namespaces(names) = self else {
            listed.items = Api::<K>::all(client.clone()).list(lp).await?.items;
            return Ok(listed);
        };
        for ns in names {
            match Api::<K>::namespaced(client.clone(), ns).list(lp).await {
                Ok(list) => listed.items.extend(list.items),
                Err(kube::Error::Api(e)) if e.code == 403 || e.code == 404 => {
                    tracing::warn!(namespace = %ns, "listing refused ({}): left out", e.message);
                    listed.skipped.push(ns.clone());
                }
                Err(e) => return Err(e),
            }
        }
        Ok(listed)
    }
}

/// What `Scope::list` found.
#[derive(Debug)]
pub struct Listed<K> {
    pub items: Vec<K>,
    /// Watched namespaces that refused the list.
    pub skipped: Vec<String>,
}

impl std::str::FromStr for Scope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::parse(s)
    }
}

/// A DNS-1123 label, what a namespace's name is.
fn is_namespace_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=63).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_watches_the_cluster() {
        assert_eq!(Scope::parse(""), Ok(Scope::Cluster));
        assert_eq!(Scope::parse(" , ,"), Ok(Scope::Cluster));
        assert!(Scope::Cluster.covers("anything"));
    }

    #[test]
    fn names_are_sorted_distinct_and_exact() {
        let s = Scope::parse("team-b, team-a,team-b").unwrap();
        assert_eq!(s, Scope::Namespaces(vec!["team-a".into(), "team-b".into()]));
        assert!(s.covers("team-a"));
        assert!(!s.covers("team-c"));
        assert!(!s.covers("team-"));
        assert!(!s.is_cluster());
    }

    #[test]
    fn globs_and_bad_names_are_refused_with_the_reason() {
        for bad in [
            "*",
            "team-*",
            "Team",
            "-a",
            "a-",
            "a_b",
            "a.b",
            &"a".repeat(64),
        ] {
            let err = Scope::parse(bad).unwrap_err();
            assert!(err.contains("not a namespace name"), "{bad}: {err}");
        }
    }

    #[test]
    fn too_many_are_refused() {
        let many: Vec<String> = (0..=MAX_WATCHED).map(|i| format!("ns-{i}")).collect();
        let err = Scope::parse(&many.join(",")).unwrap_err();
        assert!(err.contains("at most 64"), "{err}");
        assert!(Scope::parse(&many[..MAX_WATCHED].join(",")).is_ok());
    }
}
