//! What the target check must look up: the API server's addresses (the `kubernetes` Service and
//! its EndpointSlice, both in `default`) and the addresses a target host resolves to. Every
//! look-up has a deadline.
//!
//! The operator resolves a host when it admits a run; the workers resolve it again when they
//! start. A DNS answer that changes in between (short TTLs, DNS rebinding) is not seen here,
//! so an allow-list of names trusts whoever controls those names' DNS.

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{Api, Client};

use super::destinations::{Policy, Target};
use crate::admin::config::AdminCaps;
use crate::base::error::{Error, Result};
use crate::base::memo::Memo;
use crate::base::outcome::Failure;

/// How long reading the `kubernetes` Service and EndpointSlice may take.
const API_LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// The API server's ClusterIPs and endpoint addresses: as read within the memory's freshness
/// (every run's check asks; only an answer is kept, a refusal or failure is asked again).
async fn api_server_addresses(
    client: &Client,
    memo: &Memo<Vec<IpAddr>>,
) -> kube::Result<Vec<IpAddr>> {
    if let Some(known) = memo.get(API_SERVER) {
        return Ok(known);
    }
    let mut found: Vec<IpAddr> = vec![];
    let services = Api::<Service>::namespaced(client.clone(), "default");
    let slices = Api::<EndpointSlice>::namespaced(client.clone(), "default");
    // Both at once: a new run's first reconcile waits for them.
    let (service, slice) =
        futures::join!(services.get_opt("kubernetes"), slices.get_opt("kubernetes"));
    if let Some(spec) = service?.and_then(|s| s.spec) {
        let ips = spec.cluster_ips.unwrap_or_default();
        found.extend(
            ips.iter()
                .chain(spec.cluster_ip.iter())
                .filter_map(|a| a.parse::<IpAddr>().ok()),
        );
    }
    if let Some(slice) = slice? {
        for e in slice.endpoints.iter().flatten() {
            found.extend(e.addresses.iter().filter_map(|a| a.parse::<IpAddr>().ok()));
        }
    }
    // The pod's own view of the Service, should the Service be unreadable or missing.
    if let Some(ip) = std::env::var("KUBERNETES_SERVICE_HOST")
        .ok()
        .and_then(|h| h.parse().ok())
    {
        found.push(ip);
    }
    found.sort();
    found.dedup();
    memo.keep(API_SERVER, found.clone());
    Ok(found)
}

/// The memory's key of the API server's addresses.
const API_SERVER: &str = "default/kubernetes";

/// The admin's lists and, unless turned off, the API server's addresses. Err(Failure) when
/// the operator may not read them (RBAC): a run is never admitted unchecked.
pub async fn policy<'a>(
    client: &Client,
    caps: &'a AdminCaps,
    memo: &Memo<Vec<IpAddr>>,
) -> Result<std::result::Result<Policy<'a>, Failure>> {
    let api_server = if caps.deny_api_server {
        match tokio::time::timeout(API_LOOKUP_TIMEOUT, api_server_addresses(client, memo)).await {
            Err(_) => {
                return Err(Error::TimedOut {
                    what: "reading the API server's addresses",
                    after: API_LOOKUP_TIMEOUT,
                })
            }
            Ok(Err(kube::Error::Api(e))) if e.code == 403 => {
                return Ok(Err(Failure::not_permitted(format!(
                    "the operator may not read Service and EndpointSlice default/kubernetes ({}), so it cannot keep benchmarks off the API server; the cluster admin can grant it (the chart's Role {{release}}-operator-apiserver) or set targets.denyApiServer=false",
                    e.message
                ))))
            }
            Ok(r) => r?,
        }
    } else {
        vec![]
    };
    Ok(Ok(Policy {
        allowed: &caps.allowed_targets,
        denied: &caps.denied_targets,
        api_server,
    }))
}

/// The addresses `host` resolves to (system resolver, like the workers), within `timeout`.
async fn resolve(
    host: &str,
    port: u16,
    timeout: Duration,
) -> std::result::Result<Vec<IpAddr>, String> {
    match tokio::time::timeout(timeout, tokio::net::lookup_host((host, port))).await {
        Err(_) => Err(format!("resolving {host} took longer than {timeout:?}")),
        Ok(Err(e)) => Err(format!("cannot resolve {host}: {e}")),
        Ok(Ok(addrs)) => {
            let mut ips: Vec<IpAddr> = addrs.map(|a| a.ip()).collect();
            ips.sort();
            ips.dedup();
            Ok(ips)
        }
    }
}

/// Checks the host of a target (`field` `value` in messages): an address as written, or every
/// address a name resolves to.
pub async fn check_host(
    policy: &Policy<'_>,
    field: &str,
    value: &str,
    host: &str,
    port: u16,
    timeout: Duration,
) -> std::result::Result<(), Failure> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let (name, addresses) = match bare.parse::<IpAddr>() {
        Ok(ip) => (None, vec![ip]),
        Err(_) => match resolve(bare, port, timeout).await {
            Ok(ips) => (Some(bare.trim_end_matches('.').to_ascii_lowercase()), ips),
            Err(e) => {
                return Err(Failure::invalid(format!(
                    "{field} {value}: {e} (the operator checks where a target resolves to before the run starts)"
                )))
            }
        },
    };
    let target = Target {
        field,
        value,
        name: name.as_deref(),
        addresses: &addresses,
    };
    policy.check(&target).map_err(Failure::not_permitted)
}

/// Checks the host of an http(s) URL.
pub async fn check_url(
    policy: &Policy<'_>,
    field: &str,
    url: &str,
    timeout: Duration,
) -> std::result::Result<(), Failure> {
    let parsed = url::Url::parse(url)
        .map_err(|e| Failure::invalid(format!("{field} {url} is not a valid URL: {e}")))?;
    let Some(host) = parsed.host_str().filter(|h| !h.is_empty()) else {
        return Err(Failure::invalid(format!("{field} {url} has no host")));
    };
    let port = parsed.port_or_known_default().unwrap_or(80);
    check_host(policy, field, url, host, port, timeout).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::config::Config;

    fn policy(caps: &AdminCaps) -> Policy<'_> {
        Policy {
            allowed: &caps.allowed_targets,
            denied: &caps.denied_targets,
            api_server: vec!["198.19.64.1".parse().unwrap()],
        }
    }

    const T: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn the_api_servers_addresses_are_read_once_while_fresh_and_a_refusal_every_time() {
        use crate::testing::fake_api::{status, FakeApi};
        let caps = Config::for_tests().caps;
        assert!(caps.deny_api_server);
        let api_server = FakeApi::default();
        let client = api_server.client(|seen| match seen.path.as_str() {
            "/api/v1/namespaces/default/services/kubernetes" => (
                200,
                serde_json::json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kubernetes"},
                                   "spec": {"clusterIP": "198.19.64.1", "clusterIPs": ["198.19.64.1"]}}),
            ),
            _ => (404, status(404, "NotFound")),
        });
        let memo = Memo::new(Duration::from_secs(3600), 1);
        for _ in 0..3 {
            let p = super::policy(&client, &caps, &memo).await.unwrap().unwrap();
            assert!(p.api_server.contains(&"198.19.64.1".parse().unwrap()));
        }
        assert_eq!(
            api_server.requests().len(),
            2,
            "{:#?}",
            api_server.requests()
        );
        // Refused (RBAC): the run is refused, and the next asks again.
        let refusing = FakeApi::default();
        let client = refusing.client(|_| (403, status(403, "Forbidden")));
        let memo = Memo::new(Duration::from_secs(3600), 1);
        for asked in [2, 4] {
            let Err(refusal) = super::policy(&client, &caps, &memo).await.unwrap() else {
                panic!("admitted without reading the API server's addresses");
            };
            assert!(
                refusal.message.contains("may not read Service"),
                "{}",
                refusal.message
            );
            assert_eq!(refusing.requests().len(), asked);
        }
    }

    /// Asserts that `url` in target.url is refused for `reason`, with a message that names the
    /// field and the URL first and holds `part`.
    async fn assert_refused(
        p: &Policy<'_>,
        url: &str,
        timeout: Duration,
        reason: &str,
        part: &str,
    ) {
        let err = check_url(p, "target.url", url, timeout).await.unwrap_err();
        assert_eq!(err.reason.as_str(), reason);
        let named = format!("target.url {url}: ");
        assert!(err.message.starts_with(&named), "{}", err.message);
        assert!(err.message.contains(part), "{}", err.message);
    }

    #[tokio::test]
    async fn urls_are_judged_by_what_their_host_resolves_to() {
        let caps = Config::for_tests().caps;
        let p = policy(&caps);
        // "localhost" goes through the system resolver (/etc/hosts) like a worker's look-up.
        let why = "(localhost resolves to it)";
        assert_refused(&p, "http://localhost:8080/", T, "NotPermitted", why).await;
        let err = check_url(&p, "target.url", "http://169.254.169.254/latest/", T)
            .await
            .unwrap_err();
        assert!(
            err.message
                .contains("169.254.169.254 is inside 169.254.0.0/16"),
            "{}",
            err.message
        );
        // Other spellings of loopback and metadata addresses.
        for url in [
            "http://[::1]/",
            "http://0x7f.1/",
            "http://2130706433/",
            "http://[::ffff:169.254.169.254]/",
            "https://198.19.64.1:443/",
        ] {
            assert!(
                check_url(&p, "target.url", url, T).await.is_err(),
                "{url} allowed"
            );
        }
        assert_eq!(
            check_url(&p, "target.url", "http://198.18.20.2:8080/", T).await,
            Ok(())
        );
        assert_eq!(
            check_host(&p, "case a: server.address", "fd00::2", "fd00::2", 5201, T).await,
            Ok(())
        );
    }

    #[tokio::test]
    async fn unresolvable_or_hostless_targets_are_invalid() {
        let caps = Config::for_tests().caps;
        let p = policy(&caps);
        // "cannot resolve ..." or, without a reachable DNS server, "resolving ... took longer".
        let (url, timeout) = ("http://no-such-host.invalid/", Duration::from_secs(2));
        assert_refused(&p, url, timeout, "InvalidSpec", "no-such-host.invalid").await;
        let err = check_url(&p, "target.url", "file:///etc/passwd", T)
            .await
            .unwrap_err();
        assert!(err.message.contains("has no host"), "{}", err.message);
    }
}
