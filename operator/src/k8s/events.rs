//! Publishing a reconcile's Events (after its status is written); a failed publish is logged,
//! never fatal.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, Recorder, Reporter};
use kube::Client;

use crate::base::events::PendingEvent;

/// Publishes and clears `events`; a failed publish is logged, never fatal.
pub async fn publish(
    client: &Client,
    reporter: &Reporter,
    reference: &ObjectReference,
    events: &mut Vec<PendingEvent>,
) {
    if events.is_empty() {
        return;
    }
    let recorder = Recorder::new(client.clone(), reporter.clone());
    for (type_, reason, note) in events.drain(..) {
        let ev = Event {
            type_,
            reason,
            note: Some(note),
            action: "Reconcile".into(),
            secondary: None,
        };
        if let Err(e) = recorder.publish(&ev, reference).await {
            tracing::debug!("publishing an event failed: {e}");
        }
    }
}
