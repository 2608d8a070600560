//! Leader election with a coordination.k8s.io Lease: only the holder runs controllers and
//! serves workers, so two replicas never both act. A replica that loses the Lease exits
//! (its Deployment restarts it as a follower). A leader that stops on a signal releases the
//! Lease once its controllers have stopped (like client-go's ReleaseOnCancel), so a follower or
//! the next pod of a rolling update takes over within [`RETRY_EVERY`] instead of waiting for
//! the Lease to expire.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::Client;

pub const LEASE_NAME: &str = "netbench-operator-leader";
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
pub const RENEW_EVERY: Duration = Duration::from_secs(5);
/// How often a follower tries to take the Lease (client-go's default retry period).
pub const RETRY_EVERY: Duration = Duration::from_secs(2);
/// A release at shutdown gives up after this (the Lease then simply expires).
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts of a release that races with a write of ours still in flight (409 Conflict).
const RELEASE_ATTEMPTS: usize = 3;

/// The leader lost its Lease while leading (renewals failed or another replica took it).
#[derive(Debug, thiserror::Error)]
#[error("lost the leader Lease")]
pub struct LostLease;

pub struct Elector {
    api: Api<Lease>,
    identity: String,
}

fn now() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

/// True when `lease` is free for `identity`: unheld (or released), held by it, or expired.
pub fn available(lease: &LeaseSpec, identity: &str, now: jiff::Timestamp) -> bool {
    match (
        &lease.holder_identity,
        &lease.renew_time,
        lease.lease_duration_seconds,
    ) {
        (None, _, _) => true,
        (Some(h), _, _) if h.is_empty() => true,
        (Some(h), _, _) if h == identity => true,
        (Some(_), Some(renewed), Some(secs)) => {
            now.duration_since(renewed.0).as_secs() >= i64::from(secs)
        }
        _ => true,
    }
}

/// The spec that hands `current` back, or None when `identity` does not hold it (a release
/// must never clear another replica's Lease). As client-go does it: no holder, a 1 s duration
/// (so candidates that only check expiry also take it at once), the transition count kept.
pub fn released(current: &LeaseSpec, identity: &str, now: jiff::Timestamp) -> Option<LeaseSpec> {
    if current.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    Some(LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        lease_transitions: current.lease_transitions,
        ..Default::default()
    })
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
            tokio::time::sleep(RETRY_EVERY).await;
        }
    }

    /// Hands the Lease back if this replica still holds it; Ok(false) when it did not (or
    /// someone else wrote it meanwhile, which means it is no longer ours to release).
    pub async fn release(&self) -> Result<bool, kube::Error> {
        for _ in 0..RELEASE_ATTEMPTS {
            let Some(mut lease) = self.api.get_opt(LEASE_NAME).await? else {
                return Ok(false);
            };
            let current = lease.spec.clone().unwrap_or_default();
            let Some(spec) = released(&current, &self.identity, jiff::Timestamp::now()) else {
                return Ok(false);
            };
            lease.spec = Some(spec);
            match self
                .api
                .replace(LEASE_NAME, &PostParams::default(), &lease)
                .await
            {
                Ok(_) => return Ok(true),
                // A renewal of ours cancelled in flight may land between the read and the
                // write: read again and re-check who holds it.
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }

    /// Runs `work` (the controllers) while renewing the Lease. When `work` ends (the
    /// controllers stopped on SIGTERM/SIGINT after finishing their reconciles), releases the
    /// Lease and returns its output; Err when the Lease is lost first (then `work` is dropped).
    pub async fn lead<T>(&self, work: impl Future<Output = T>) -> Result<T, LostLease> {
        let out = tokio::select! {
            out = work => out,
            () = self.hold() => return Err(LostLease),
        };
        match tokio::time::timeout(RELEASE_TIMEOUT, self.release()).await {
            Ok(Ok(true)) => tracing::info!("released the leader Lease"),
            Ok(Ok(false)) => tracing::info!("the leader Lease was no longer ours to release"),
            Ok(Err(e)) => tracing::warn!("releasing the leader Lease: {e} (it will expire)"),
            Err(_) => tracing::warn!("releasing the leader Lease timed out (it will expire)"),
        }
        Ok(out)
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
        let blank = LeaseSpec {
            holder_identity: Some(String::new()),
            ..held.clone()
        };
        assert!(available(&blank, "b", later(1)), "an empty holder is free");
    }

    #[test]
    fn release_only_what_we_hold() {
        let t0: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let t1 = t0.checked_add(jiff::SignedDuration::from_secs(3)).unwrap();
        let held = LeaseSpec {
            holder_identity: Some("a".into()),
            acquire_time: Some(MicroTime(t0)),
            renew_time: Some(MicroTime(t0)),
            lease_duration_seconds: Some(15),
            lease_transitions: Some(4),
            ..Default::default()
        };
        assert_eq!(
            released(&held, "b", t1),
            None,
            "never release another's Lease"
        );
        assert_eq!(
            released(&LeaseSpec::default(), "a", t1),
            None,
            "nothing held"
        );
        let r = released(&held, "a", t1).expect("the holder releases");
        assert_eq!(r.holder_identity, None);
        assert_eq!(r.lease_duration_seconds, Some(1));
        assert_eq!(r.renew_time, Some(MicroTime(t1)));
        assert_eq!(
            r.lease_transitions,
            Some(4),
            "a release is not a transition"
        );
        assert!(
            available(&r, "b", t1),
            "another replica may take a released Lease at once"
        );
    }
}
