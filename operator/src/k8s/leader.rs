//! Leader election with a coordination.k8s.io Lease: only the holder runs controllers and
//! serves workers, so two replicas never both act. A replica that loses the Lease exits
//! (its Deployment restarts it as a follower). A leader that stops on a signal releases the
//! Lease once its controllers have stopped (like client-go's ReleaseOnCancel), so a follower or
//! the next pod of a rolling update takes over within [`RETRY_EVERY`] instead of waiting for
//! the Lease to expire.
//!
//! Expiry follows client-go's rule: another replica's Lease counts as expired when its record
//! (holder, renewTime) has not changed for leaseDurationSeconds *as measured by our own clock*
//! since we first saw that record. The renewTime written by another replica is compared with
//! nothing, so clock skew between nodes cannot make two replicas lead at once.

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::Client;
use prometheus::{IntGauge, Registry};

use crate::base::metrics::Family;

/// `netbench_leader`: 1 while this replica holds the leader Lease.
pub struct LeaderMetrics {
    pub leader: IntGauge,
}

impl Family for LeaderMetrics {
    fn register(registry: &Registry) -> Self {
        let leader = IntGauge::new(
            "netbench_leader",
            "1 while this replica holds the leader Lease",
        )
        .expect("valid metric");
        registry
            .register(Box::new(leader.clone()))
            .expect("unique metric");
        LeaderMetrics { leader }
    }
}

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
    observer: Observer,
}

/// The Lease record last seen and when (our clock) it was first seen.
#[derive(Default)]
struct Observer(Mutex<Option<(Record, Instant)>>);

impl Observer {
    /// How long (our clock, up to `now`) the Lease has carried this record.
    fn unchanged_for(&self, lease: &LeaseSpec, now: Instant) -> Duration {
        let record = record_of(lease);
        let mut observed = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match observed.as_ref() {
            Some((seen, at)) if *seen == record => now.saturating_duration_since(*at),
            _ => {
                *observed = Some((record, now));
                Duration::ZERO
            }
        }
    }
}

/// What identifies one renewal of a Lease: a renewal changes renewTime (and the holder may change).
type Record = (Option<String>, Option<MicroTime>, Option<i32>);

fn record_of(lease: &LeaseSpec) -> Record {
    (
        lease.holder_identity.clone(),
        lease.renew_time.clone(),
        lease.lease_duration_seconds,
    )
}

fn now() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

/// True when `lease` is free for `identity`: unheld (or released), held by it, or expired:
/// unchanged for its leaseDurationSeconds since we first saw this record (`unchanged_for`,
/// measured with our own clock).
pub fn available(lease: &LeaseSpec, identity: &str, unchanged_for: Duration) -> bool {
    match (&lease.holder_identity, lease.lease_duration_seconds) {
        (None, _) => true,
        (Some(h), _) if h.is_empty() => true,
        (Some(h), _) if h == identity => true,
        // A missing or non-positive duration cannot keep the Lease held.
        (Some(_), secs) => {
            let secs = secs.and_then(|s| u64::try_from(s).ok()).unwrap_or(0);
            unchanged_for >= Duration::from_secs(secs)
        }
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
            observer: Observer::default(),
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
                if !available(
                    &current,
                    &self.identity,
                    self.observer.unchanged_for(&current, Instant::now()),
                ) {
                    return Ok(false);
                }
                let ours = current.holder_identity.as_deref() == Some(self.identity.as_str());
                let transitions = current
                    .lease_transitions
                    .unwrap_or(0)
                    .saturating_add(i32::from(!ours));
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
        let secs = Duration::from_secs;
        assert!(available(&held, "a", secs(1)), "holder renews");
        assert!(
            !available(&held, "b", secs(10)),
            "others wait while it is fresh"
        );
        assert!(
            available(&held, "b", secs(16)),
            "expired leases can be taken"
        );
        assert!(available(&LeaseSpec::default(), "b", Duration::ZERO));
        let blank = LeaseSpec {
            holder_identity: Some(String::new()),
            ..held.clone()
        };
        assert!(available(&blank, "b", secs(1)), "an empty holder is free");
        let hostile = LeaseSpec {
            lease_duration_seconds: Some(-5),
            ..held.clone()
        };
        assert!(
            available(&hostile, "b", Duration::ZERO),
            "no panic, not held"
        );
    }

    #[test]
    fn expiry_is_measured_by_our_clock_not_the_holders() {
        // The holder's clock is an hour behind ours: its renewTime looks ancient, yet the
        // Lease is fresh until it stays unchanged for 15 s of our time.
        let ancient: jiff::Timestamp = "2020-01-01T00:00:00Z".parse().unwrap();
        let held = |renewed: jiff::Timestamp| LeaseSpec {
            holder_identity: Some("a".into()),
            renew_time: Some(MicroTime(renewed)),
            lease_duration_seconds: Some(15),
            ..Default::default()
        };
        let observer = Observer::default();
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let first = observer.unchanged_for(&held(ancient), at(0));
        assert!(
            !available(&held(ancient), "b", first),
            "first sight is fresh"
        );
        let later = observer.unchanged_for(&held(ancient), at(10));
        assert!(!available(&held(ancient), "b", later));
        // A renewal (new renewTime, whatever its clock says) restarts our count.
        let renewed = ancient
            .checked_add(jiff::SignedDuration::from_secs(1))
            .unwrap();
        let after_renewal = observer.unchanged_for(&held(renewed), at(14));
        assert_eq!(after_renewal, Duration::ZERO);
        assert!(!available(
            &held(renewed),
            "b",
            observer.unchanged_for(&held(renewed), at(28))
        ));
        assert!(available(
            &held(renewed),
            "b",
            observer.unchanged_for(&held(renewed), at(29))
        ));
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
            available(&r, "b", Duration::ZERO),
            "another replica may take a released Lease at once"
        );
    }
}
