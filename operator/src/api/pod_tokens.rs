//! Worker identity bound to the pod. A worker presents its pod's projected ServiceAccount token
//! (audience `netbench`, rotated by the kubelet); a TokenReview tells which pod holds it, and the
//! pod object must be the operator's worker of that run: labelled with the run and the role the
//! registry expects, and controlled by the benchmark. Positive answers are cached briefly and
//! boundedly, so a busy worker costs one TokenReview and one pod read per `CACHE_FOR`. The pod
//! is read from the controllers' pod watches when they hold it as the token's very pod, with
//! what a caller of its role needs (a server's addresses), else from the API server.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use protocol::worker::Role;
use tokio::sync::Semaphore;

use super::identity::{AuthError, Authenticator};
use crate::base::labels;
use crate::k8s::watched_pods::WatchedPods;
use crate::store::registry::{Caller, Registry, RunSpec};

pub use crate::k8s::workers::AUDIENCE;
const POD_NAME_KEY: &str = "authentication.kubernetes.io/pod-name";
const POD_UID_KEY: &str = "authentication.kubernetes.io/pod-uid";
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";
/// How long a positive answer is trusted.
const CACHE_FOR: Duration = Duration::from_secs(30);
/// Most tokens remembered at once.
const CACHE_ENTRIES: usize = 4096;
/// TokenReviews in flight at once; more callers wait, within their request deadline.
const REVIEWS_AT_ONCE: usize = 16;
/// Longest bearer token sent for review (projected tokens are about 1 KiB).
const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// What the API server says about the holder of a token, and the labels and controller of its
/// pod.
#[derive(Clone, Debug, PartialEq)]
pub struct PodFacts {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    pub controller_uid: Option<String>,
    /// spec.nodeName.
    pub node: Option<String>,
    /// status.podIPs (and status.podIP), and on the host network status.hostIPs (and
    /// status.hostIP): the addresses a server of this pod may register.
    pub addresses: Vec<IpAddr>,
}

/// Checks worker tokens with the API server.
pub struct PodTokens {
    client: kube::Client,
    runs: Arc<Registry>,
    pods: Arc<WatchedPods>,
    cache: Mutex<HashMap<String, (Instant, PodFacts)>>,
    reviews: Semaphore,
}

impl PodTokens {
    pub fn new(client: kube::Client, runs: Arc<Registry>, pods: Arc<WatchedPods>) -> PodTokens {
        PodTokens {
            client,
            runs,
            pods,
            cache: Mutex::new(HashMap::new()),
            reviews: Semaphore::new(REVIEWS_AT_ONCE),
        }
    }

    fn cached(&self, token: &str) -> Option<PodFacts> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, facts) = cache.get(token)?;
        (at.elapsed() < CACHE_FOR).then(|| facts.clone())
    }

    fn remember(&self, token: &str, facts: &PodFacts) {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= CACHE_ENTRIES {
            cache.retain(|_, (at, _)| at.elapsed() < CACHE_FOR);
        }
        if cache.len() >= CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(token.to_string(), (Instant::now(), facts.clone()));
    }

    /// The TokenReview, then the pod it names (only a pod this run could have: another
    /// namespace's pod is never read, which a namespace-scoped operator may not).
    async fn look_up(&self, spec: &RunSpec, token: &str) -> Result<PodFacts, AuthError> {
        let _slot = self
            .reviews
            .acquire()
            .await
            .map_err(|e| AuthError::Unavailable(e.to_string()))?;
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: Some(vec![AUDIENCE.to_string()]),
            },
            ..Default::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| AuthError::Unavailable(format!("TokenReview: {e}")))?;
        let identity = reviewed_pod(reviewed)?;
        if identity.namespace != spec.namespace || !spec.workers.contains_key(&identity.name) {
            return Err(AuthError::NotAWorker(format!(
                "pod {}/{}: not a worker of this run's current step",
                identity.namespace, identity.name
            )));
        }
        if let Some(watched) = self.pods.get(&identity.namespace, &identity.name) {
            match pod_facts(identity.clone(), &watched) {
                Ok(facts) if facts.controller_uid.is_some() && worth_keeping(spec, &facts) => {
                    return Ok(facts)
                }
                // Another pod of that name, a pod the watch keeps little of, a server without
                // an address yet: the API server says.
                _ => {}
            }
        }
        let pod = Api::<Pod>::namespaced(self.client.clone(), &identity.namespace)
            .get_opt(&identity.name)
            .await
            .map_err(|e| AuthError::Unavailable(format!("reading the pod: {e}")))?
            .ok_or_else(|| AuthError::NotAWorker("the token's pod is gone".into()))?;
        pod_facts(identity, &pod)
    }
}

impl Authenticator for PodTokens {
    fn authenticate<'a>(
        &'a self,
        run: &'a str,
        bearer: &'a str,
    ) -> BoxFuture<'a, Result<Caller, AuthError>> {
        Box::pin(async move {
            // Unknown runs cost no API call.
            let spec = self.runs.spec(run).ok_or(AuthError::UnknownRun)?;
            if bearer.len() > MAX_TOKEN_BYTES {
                return Err(AuthError::BadToken);
            }
            let facts = match self.cached(bearer) {
                Some(facts) => facts,
                None => {
                    let facts = self.look_up(&spec, bearer).await?;
                    if worth_keeping(&spec, &facts) {
                        self.remember(bearer, &facts);
                    }
                    facts
                }
            };
            expected_worker(&spec, run, &facts)
        })
    }
}

/// Whether a positive answer may serve the pod's next calls: a server registers one of its
/// pod's addresses, so a server pod whose status has none yet is read again on its next call;
/// a client's calls need no address.
fn worth_keeping(spec: &RunSpec, facts: &PodFacts) -> bool {
    !facts.addresses.is_empty() || spec.workers.get(&facts.name) != Some(&Role::Server)
}

/// Who a TokenReview says holds the token: a pod's ServiceAccount, for our audience.
#[derive(Clone, Debug, PartialEq)]
pub struct PodIdentity {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

pub fn reviewed_pod(review: TokenReview) -> Result<PodIdentity, AuthError> {
    let status = review.status.unwrap_or_default();
    let for_us = status
        .audiences
        .as_ref()
        .is_some_and(|a| a.iter().any(|a| a == AUDIENCE));
    if status.authenticated != Some(true) || !for_us {
        return Err(AuthError::BadToken);
    }
    let user = status.user.unwrap_or_default();
    let namespace = user
        .username
        .as_deref()
        .and_then(|u| u.strip_prefix(SERVICE_ACCOUNT_PREFIX))
        .and_then(|rest| rest.split_once(':'))
        .map(|(ns, _sa)| ns.to_string())
        .ok_or_else(|| AuthError::NotAWorker("not a ServiceAccount token".into()))?;
    let extra = |key: &str| -> Option<String> {
        let values = user.extra.as_ref()?.get(key)?;
        match values.as_slice() {
            [one] => Some(one.clone()),
            _ => None,
        }
    };
    let (Some(name), Some(uid)) = (extra(POD_NAME_KEY), extra(POD_UID_KEY)) else {
        return Err(AuthError::NotAWorker(
            "the token is not bound to a pod".into(),
        ));
    };
    Ok(PodIdentity {
        namespace,
        name,
        uid,
    })
}

/// The facts of `pod`, which must be the very pod the token was issued for.
pub fn pod_facts(identity: PodIdentity, pod: &Pod) -> Result<PodFacts, AuthError> {
    if pod.metadata.uid.as_deref() != Some(identity.uid.as_str()) {
        return Err(AuthError::NotAWorker("the token's pod was replaced".into()));
    }
    let controller_uid = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.clone());
    Ok(PodFacts {
        namespace: identity.namespace,
        name: identity.name,
        uid: identity.uid,
        labels: pod.metadata.labels.clone().unwrap_or_default(),
        controller_uid,
        node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        addresses: pod_addresses(pod),
    })
}

/// The addresses the API server lists for `pod` (unparseable entries left out): its pod IPs,
/// and on the host network its node's (there the pod IPs are the node's too).
pub fn pod_addresses(pod: &Pod) -> Vec<IpAddr> {
    let Some(status) = &pod.status else {
        return vec![];
    };
    let host_network = pod
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    let pod_ips = status.pod_ips.iter().flatten().map(|p| &p.ip);
    let host_ips = status
        .host_ips
        .iter()
        .flatten()
        .map(|h| &h.ip)
        .chain(&status.host_ip)
        .filter(|_| host_network);
    let mut addresses: Vec<IpAddr> = pod_ips
        .chain(&status.pod_ip)
        .chain(host_ips)
        .filter_map(|ip| ip.parse().ok())
        .collect();
    addresses.sort();
    addresses.dedup();
    addresses
}

/// The caller, when `facts` describe a worker pod the operator made for `run`'s current step.
pub fn expected_worker(spec: &RunSpec, run: &str, facts: &PodFacts) -> Result<Caller, AuthError> {
    let not = |why: &str| Err(AuthError::NotAWorker(format!("pod {}: {why}", facts.name)));
    if facts.namespace != spec.namespace {
        return not("not in the benchmark's namespace");
    }
    let Some(role) = spec.workers.get(&facts.name) else {
        return not("not a worker of this run's current step");
    };
    let label = |key: &str| facts.labels.get(key).map(String::as_str);
    if label(labels::RUN) != Some(run) || label(labels::ROLE) != Some(role_name(*role)) {
        return not("not labelled as this run's worker in that role");
    }
    if facts.controller_uid.as_deref() != Some(spec.uid.as_str()) {
        return not("not controlled by the benchmark");
    }
    Ok(Caller {
        namespace: facts.namespace.clone(),
        worker: facts.name.clone(),
        node: facts.node.clone(),
        addresses: facts.addresses.clone(),
    })
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Client => "client",
        Role::Server => "server",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::{TokenReviewStatus, UserInfo};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    use protocol::ReportKind;
    /// A TokenReview answer as the API server gives it for a pod's projected token.
    fn review_of(namespace: &str, pod: &str, uid: &str) -> TokenReview {
        let extra = BTreeMap::from([
            (POD_NAME_KEY.to_string(), vec![pod.to_string()]),
            (POD_UID_KEY.to_string(), vec![uid.to_string()]),
        ]);
        TokenReview {
            status: Some(TokenReviewStatus {
                authenticated: Some(true),
                audiences: Some(vec![AUDIENCE.to_string()]),
                user: Some(UserInfo {
                    username: Some(format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:default")),
                    extra: Some(extra),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn spec() -> RunSpec {
        RunSpec {
            kind: "EgressBenchmark".into(),
            namespace: "team".into(),
            uid: "bench-uid".into(),
            report_kind: ReportKind::Tcp,
            ..crate::testing::run_spec(&[("w-client", Role::Client), ("w-server", Role::Server)])
        }
    }

    /// The pod the operator made for `name` in `role`.
    fn worker_pod(name: &str, uid: &str, role: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(uid.into()),
                labels: Some(BTreeMap::from([
                    (labels::RUN.to_string(), "run1".to_string()),
                    (labels::ROLE.to_string(), role.to_string()),
                ])),
                owner_references: Some(vec![OwnerReference {
                    uid: "bench-uid".into(),
                    controller: Some(true),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn facts(review: TokenReview, pod: &Pod) -> Result<PodFacts, AuthError> {
        pod_facts(reviewed_pod(review)?, pod)
    }

    #[test]
    fn a_client_is_remembered_without_an_address_a_server_only_with_one() {
        let client = facts(
            review_of("team", "w-client", "uid-1"),
            &worker_pod("w-client", "uid-1", "client"),
        )
        .unwrap();
        let server = facts(
            review_of("team", "w-server", "uid-2"),
            &worker_pod("w-server", "uid-2", "server"),
        )
        .unwrap();
        assert!(client.addresses.is_empty() && server.addresses.is_empty());
        assert!(
            worth_keeping(&spec(), &client),
            "a client's calls need no address"
        );
        assert!(
            !worth_keeping(&spec(), &server),
            "read again until it has an address"
        );
        let mut addressed = server.clone();
        addressed.addresses = vec!["10.0.0.2".parse().unwrap()];
        assert!(worth_keeping(&spec(), &addressed));
    }

    #[test]
    fn a_worker_pods_token_names_that_worker() {
        let pod = worker_pod("w-client", "uid-1", "client");
        let f = facts(review_of("team", "w-client", "uid-1"), &pod).unwrap();
        let caller = expected_worker(&spec(), "run1", &f).unwrap();
        assert_eq!(caller.worker, "w-client");
        assert_eq!(caller.namespace, "team");
    }

    #[test]
    fn a_pods_node_and_addresses_are_what_the_api_server_lists() {
        use k8s_openapi::api::core::v1::{HostIP, PodIP, PodSpec, PodStatus};
        let mut pod = worker_pod("w-server", "uid-1", "server");
        pod.spec = Some(PodSpec {
            node_name: Some("n1".into()),
            ..Default::default()
        });
        pod.status = Some(PodStatus {
            pod_ip: Some("10.244.1.7".into()),
            pod_ips: Some(vec![
                PodIP {
                    ip: "10.244.1.7".into(),
                },
                PodIP {
                    ip: "fd00:10:244::7".into(),
                },
                PodIP {
                    ip: "not an address".into(),
                },
            ]),
            host_ip: Some("192.168.1.11".into()),
            host_ips: Some(vec![HostIP {
                ip: "192.168.1.11".into(),
            }]),
            ..Default::default()
        });
        let f = facts(review_of("team", "w-server", "uid-1"), &pod).unwrap();
        assert_eq!(f.node.as_deref(), Some("n1"));
        let shown: Vec<String> = f.addresses.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["10.244.1.7", "fd00:10:244::7"], "not the node's");
        let caller = expected_worker(&spec(), "run1", &f).unwrap();
        assert_eq!(
            (caller.node, caller.addresses),
            (f.node.clone(), f.addresses.clone())
        );
        // On the host network the node's addresses are the pod's.
        if let Some(s) = pod.spec.as_mut() {
            s.host_network = Some(true);
        }
        let shown: Vec<String> = pod_addresses(&pod)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(shown, ["10.244.1.7", "192.168.1.11", "fd00:10:244::7"]);
        pod.status = None;
        assert!(pod_addresses(&pod).is_empty());
    }

    #[test]
    fn tokens_that_are_not_a_workers_are_refused() {
        let pod = worker_pod("w-client", "uid-1", "client");
        let refused = |review: TokenReview, pod: &Pod, run: &str| {
            facts(review, pod).and_then(|f| expected_worker(&spec(), run, &f))
        };
        let mut unauthenticated = review_of("team", "w-client", "uid-1");
        unauthenticated.status.as_mut().unwrap().authenticated = Some(false);
        assert_eq!(
            refused(unauthenticated, &pod, "run1"),
            Err(AuthError::BadToken)
        );
        let mut other_audience = review_of("team", "w-client", "uid-1");
        other_audience.status.as_mut().unwrap().audiences = Some(vec!["https://kubernetes".into()]);
        assert_eq!(
            refused(other_audience, &pod, "run1"),
            Err(AuthError::BadToken)
        );
        let mut not_bound = review_of("team", "w-client", "uid-1");
        not_bound
            .status
            .as_mut()
            .unwrap()
            .user
            .as_mut()
            .unwrap()
            .extra = None;
        assert!(matches!(
            refused(not_bound, &pod, "run1"),
            Err(AuthError::NotAWorker(_))
        ));
        let cases = [
            (
                review_of("team", "w-client", "uid-2"),
                pod.clone(),
                "run1",
                "replaced pod",
            ),
            (
                review_of("other", "w-client", "uid-1"),
                pod.clone(),
                "run1",
                "other namespace",
            ),
            (
                review_of("team", "intruder", "uid-1"),
                worker_pod("intruder", "uid-1", "client"),
                "run1",
                "not a worker name",
            ),
            (
                review_of("team", "w-client", "uid-1"),
                pod.clone(),
                "run2",
                "labelled for another run",
            ),
            (
                review_of("team", "w-client", "uid-1"),
                worker_pod("w-client", "uid-1", "server"),
                "run1",
                "other role",
            ),
        ];
        for (review, pod, run, why) in cases {
            assert!(
                matches!(refused(review, &pod, run), Err(AuthError::NotAWorker(_))),
                "{why}"
            );
        }
        let mut foreign = pod.clone();
        foreign.metadata.owner_references = None;
        assert!(matches!(
            refused(review_of("team", "w-client", "uid-1"), &foreign, "run1"),
            Err(AuthError::NotAWorker(_))
        ));
    }

    /// Authenticates the client `w-client` of run1 with a fake API server that reviews every
    /// token as that pod's (uid `pod-uid`) and serves `served` as the pod; the watches hold
    /// `watched`. Returns the outcome and the requests made.
    async fn authenticate_with(
        watched: Vec<Pod>,
        served: Pod,
    ) -> (Result<Caller, AuthError>, Vec<String>) {
        let api = crate::testing::FakeApi::default();
        let review = serde_json::to_value(review_of("team", "w-client", "pod-uid")).unwrap();
        let served = serde_json::to_value(served).unwrap();
        let client = api.client(move |seen| match seen.method.as_str() {
            "POST" => (201, review.clone()),
            _ => (200, served.clone()),
        });
        let runs = Arc::new(Registry::default());
        runs.announce("run1", spec());
        let pods = Arc::new(WatchedPods::default());
        let mut kept = watched;
        for p in &mut kept {
            p.metadata.namespace = Some("team".into());
            crate::k8s::watched_pods::keep_what_is_read(p, "EgressBenchmark");
        }
        pods.add(
            crate::k8s::watched_pods::Place::Cluster,
            crate::k8s::watched_pods::listed(kept),
        );
        let tokens = PodTokens::new(client, runs, pods);
        let outcome = tokens.authenticate("run1", "token").await;
        (outcome, api.requests())
    }

    fn ours(name: &str, uid: &str, role: &str) -> Pod {
        let mut pod = worker_pod(name, uid, role);
        if let Some(owner) = pod
            .metadata
            .owner_references
            .as_mut()
            .and_then(|o| o.first_mut())
        {
            owner.kind = "EgressBenchmark".into();
        }
        pod
    }

    #[tokio::test]
    async fn the_watched_pod_spares_a_read_and_another_pod_of_its_name_does_not() {
        let pod = ours("w-client", "pod-uid", "client");
        let (outcome, asked) = authenticate_with(vec![pod.clone()], pod.clone()).await;
        assert_eq!(outcome.unwrap().worker, "w-client");
        assert_eq!(asked.len(), 1, "the TokenReview only: {asked:?}");
        // The watch holds an earlier pod of that name: the API server is asked, and says.
        let earlier = ours("w-client", "earlier-uid", "client");
        let (outcome, asked) = authenticate_with(vec![earlier], pod.clone()).await;
        assert_eq!(outcome.unwrap().worker, "w-client");
        assert!(
            asked[1].starts_with("GET /api/v1/namespaces/team/pods/w-client"),
            "{asked:?}"
        );
        // Nothing watched: read as before; a replaced pod is refused as before.
        let (_, asked) = authenticate_with(vec![], pod).await;
        assert_eq!(asked.len(), 2, "{asked:?}");
        let replaced = ours("w-client", "other-uid", "client");
        let (outcome, _) = authenticate_with(vec![], replaced).await;
        assert!(
            matches!(outcome, Err(AuthError::NotAWorker(_))),
            "{outcome:?}"
        );
    }
}
