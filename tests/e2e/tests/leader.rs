//! Leader election against the real API server: two electors on one Lease in a namespace of
//! the test's own (the deployed operator's Lease is never touched). Needs KUBECONFIG for the
//! test cluster (`eval "$(tests/e2e/setup.sh)"`, or tests/cluster/up.sh's export line).

use std::time::Instant;

use e2e::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use operator::k8s::leader::{Elector, LEASE_DURATION, LEASE_NAME, RENEW_EVERY, RETRY_EVERY};

/// The Lease's renewTime, as the API server returns it.
async fn renewed_at(api: &Api<Lease>) -> Option<String> {
    renew_time(&api.get(LEASE_NAME).await.expect("read the Lease"))
}

fn renew_time(lease: &Lease) -> Option<String> {
    let spec = lease.spec.as_ref()?;
    spec.renew_time.as_ref().map(|t| format!("{:?}", t.0))
}

async fn holder(api: &Api<Lease>) -> Option<String> {
    let lease = api.get(LEASE_NAME).await.expect("read the Lease");
    lease.spec.and_then(|s| s.holder_identity)
}

/// A leader whose work stops (as the controllers do on SIGTERM) releases the Lease, and a
/// follower polling with `acquire` leads well before the old Lease could have expired.
#[tokio::test]
async fn a_stopping_leader_hands_the_lease_over_at_once() {
    let client = client().await;
    let ns = TestNs::new(&client, "lease").await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns.name);
    let a = Elector::new(client.clone(), &ns.name, "replica-a");
    let b = Elector::new(client.clone(), &ns.name, "replica-b");

    assert!(a.try_acquire().await.unwrap(), "a takes the fresh Lease");
    assert!(!b.try_acquire().await.unwrap(), "b must wait while a leads");

    let acquired_at = renewed_at(&leases).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let leader = async {
        a.lead(async {
            let _ = stopped.await;
            // The "controllers" stop acting here, and until they have the Lease stays a's.
            holder(&leases).await
        })
        .await
        .expect("a keeps the Lease while it leads")
    };
    let follower = async {
        // a renews while it leads (wait until it has: renewTime moves); b must not get in.
        let renewed = |l: &Lease| renew_time(l) != acquired_at;
        wait_for(
            &leases,
            LEASE_NAME,
            "renewal by a",
            3 * RENEW_EVERY,
            renewed,
        )
        .await;
        assert!(
            !b.try_acquire().await.unwrap(),
            "b must not lead while a renews"
        );
        assert_eq!(holder(&leases).await.as_deref(), Some("replica-a"));
        let _ = stop.send(());
        let asked = Instant::now();
        b.acquire().await;
        asked.elapsed()
    };
    let (holder_as_work_ended, handover) = tokio::join!(leader, follower);
    assert_eq!(
        holder_as_work_ended.as_deref(),
        Some("replica-a"),
        "the Lease must be released only after the work has ended"
    );
    // a renewed within the last RENEW_EVERY, so without a release b could lead only after
    // LEASE_DURATION - RENEW_EVERY; with it, b's next poll (every RETRY_EVERY) succeeds.
    assert!(
        handover < LEASE_DURATION - RENEW_EVERY,
        "b led after {handover:?}: the Lease expired instead of being released \
         (b polls every {RETRY_EVERY:?})"
    );
    assert_eq!(holder(&leases).await.as_deref(), Some("replica-b"));
    let spec = leases.get(LEASE_NAME).await.unwrap().spec.unwrap();
    assert_eq!(spec.lease_transitions, Some(1), "one hand-over: a -> b");
    assert_eq!(
        spec.lease_duration_seconds,
        Some(LEASE_DURATION.as_secs() as i32),
        "b holds it with the full duration again"
    );

    // A late release by the former leader must not clear b's Lease.
    assert!(!a.release().await.unwrap(), "a no longer holds the Lease");
    assert_eq!(holder(&leases).await.as_deref(), Some("replica-b"));
    // b's own release works and leaves the Lease free for anyone.
    assert!(b.release().await.unwrap());
    assert_eq!(holder(&leases).await, None);
    assert!(
        a.try_acquire().await.unwrap(),
        "a released Lease is free at once"
    );
}
