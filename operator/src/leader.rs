//! Leader election with a coordination.k8s.io Lease: only the holder runs controllers and
//! serves workers, so two replicas never both act. A replica that loses the Lease exits
//! (its Deployment restarts it as a follower).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::Client;

pub const LEASE_NAME: &str = "netbench-operator-leader";
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
pub const RENEW_EVERY: Duration = Duration::from_secs(5);

pub struct Elector {
    api: Api<Lease>,
    identity: String,
}

fn now() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

/// True when `lease` is free for `identity`: unheld, held by it, or expired.
pub fn available(lease: &LeaseSpec, identity: &str, now: jiff::Timestamp) -> bool {
    match (
        &lease.holder_identity,
        &lease.renew_time,
        lease.lease_duration_seconds,
    ) {
        (None, _, _) => true,
        (Some(h), _, _) if h == identity => true,
        (Some(_), Some(renewed), Some(secs)) => {
            now.duration_since(renewed.0).as_secs() >= i64::from(secs)
        }
        _ => true,
    }
}

impl Elector {
    pub fn new(client: Client, namespace: &str, identity: &str) -> Elector {
        Elector {
            api: Api::namespaced(client, namespace),
            identity: identity.to_string(),
        }
    }

    /// One attempt to take or renew the Lease; Ok(true) while we hold it. Uses the
    /// resourceVersion for optimistic concurrency, so two candidates cannot both win.
    pub async fn try_acquire(&self) -> Result<bool, kube::Error> {
        let spec = |transitions: i32, acquired: Option<MicroTime>| LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(LEASE_DURATION.as_secs() as i32),
            acquire_time: acquired.or_else(|| Some(now())),
            renew_time: Some(now()),
            lease_transitions: Some(transitions),
            ..Default::default()
        };
        match self.api.get_opt(LEASE_NAME).await? {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(LEASE_NAME.into()),
                        ..Default::default()
                    },
                    spec: Some(spec(0, None)),
                };
                match self.api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
            Some(mut lease) => {
                let current = lease.spec.clone().unwrap_or_default();
                if !available(&current, &self.identity, jiff::Timestamp::now()) {
                    return Ok(false);
                }
                let ours = current.holder_identity.as_deref() == Some(self.identity.as_str());
                let transitions = current.lease_transitions.unwrap_or(0) + i32::from(!ours);
                lease.spec = Some(spec(
                    transitions,
                    if ours { current.acquire_time } else { None },
                ));
                match self
                    .api
                    .replace(LEASE_NAME, &PostParams::default(), &lease)
                    .await
                {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Waits until this replica holds the Lease.
    pub async fn acquire(&self) {
        loop {
            match self.try_acquire().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => tracing::warn!("leader election: {e}"),
            }
            tokio::time::sleep(RENEW_EVERY).await;
        }
    }

    /// Renews until a renewal fails for longer than the Lease lasts; then returns.
    pub async fn hold(&self) {
        let mut last_ok = std::time::Instant::now();
        loop {
            tokio::time::sleep(RENEW_EVERY).await;
            match self.try_acquire().await {
                Ok(true) => last_ok = std::time::Instant::now(),
                Ok(false) => return,
                Err(e) => {
                    tracing::warn!("renewing the leader Lease: {e}");
                    if last_ok.elapsed() >= LEASE_DURATION - RENEW_EVERY {
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_availability() {
        let t0: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let held = LeaseSpec {
            holder_identity: Some("a".into()),
            renew_time: Some(MicroTime(t0)),
            lease_duration_seconds: Some(15),
            ..Default::default()
        };
        let later = |s: i64| t0.checked_add(jiff::SignedDuration::from_secs(s)).unwrap();
        assert!(available(&held, "a", later(1)), "holder renews");
        assert!(
            !available(&held, "b", later(10)),
            "others wait while it is fresh"
        );
        assert!(
            available(&held, "b", later(16)),
            "expired leases can be taken"
        );
        assert!(available(&LeaseSpec::default(), "b", t0));
    }
}
