//! Publishing a reconcile's Events (after its status is written), in the background: a
//! reconcile hands them over and goes on, so its time is not the Events' round trips (about
//! 7 per benchmark, each a POST). Each object's Events are published in the order they were
//! handed over, by one task per object that has some waiting; a failed or late publish is
//! logged, never fatal. At most [`POSTS_AT_ONCE`] POSTs are in flight (the Lease renewals and
//! status writes share the client), and at most [`MOST_WAITING`] hand-overs wait: beyond, new
//! ones are dropped and counted in the log (a slow or throttling API server, or an author
//! editing a spec in a loop, cannot grow the operator's memory without bound). A process that
//! loses its Lease exits at once (main.rs): the Events still waiting then are lost.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, Recorder, Reporter};
use kube::Client;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::{Notify, Semaphore};

use crate::base::events::PendingEvent;

/// How long one Event's POST may take before it is given up (logged).
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(10);
/// The API server refuses an events.k8s.io Event whose note is longer (in bytes).
const NOTE_MAX_BYTES: usize = 1024;
/// Event POSTs in flight at once, over every object.
pub const POSTS_AT_ONCE: usize = 16;
/// Hand-overs waiting at most, over every object.
pub const MOST_WAITING: usize = 4096;

/// One hand-over: an object and its Events, in order.
type Batch = (ObjectReference, Vec<PendingEvent>);

/// The Events waiting to be published, one ordered queue per object.
pub struct Publisher {
    client: Client,
    reporter: Reporter,
    /// The queue of each object that has Events waiting (by uid, else namespace/name). A
    /// queue's task removes it, under this lock, once it found the queue empty under it.
    queues: Mutex<HashMap<String, UnboundedSender<Batch>>>,
    /// Batches handed over and not yet published (or given up).
    waiting: AtomicUsize,
    /// Told whenever a batch is done.
    done: Notify,
    /// Permits for [`POSTS_AT_ONCE`] POSTs.
    posts: Semaphore,
    /// Hand-overs dropped because [`MOST_WAITING`] were waiting.
    dropped: AtomicUsize,
    /// Where the queues' tasks run: the runtime it was made in, whichever thread hands
    /// Events over (a reconcile on the controller's own thread, `base::own_thread`).
    runtime: Option<tokio::runtime::Handle>,
}

impl Publisher {
    pub fn new(client: Client, reporter: Reporter) -> Arc<Self> {
        Arc::new(Self {
            client,
            reporter,
            queues: Mutex::default(),
            waiting: AtomicUsize::new(0),
            done: Notify::new(),
            posts: Semaphore::new(POSTS_AT_ONCE),
            dropped: AtomicUsize::new(0),
            runtime: tokio::runtime::Handle::try_current().ok(),
        })
    }

    /// Takes `events` about `reference` (leaving it empty) to publish them after those handed
    /// over before for the same object. Returns at once.
    pub fn send(self: &Arc<Self>, reference: &ObjectReference, events: &mut Vec<PendingEvent>) {
        if events.is_empty() {
            return;
        }
        let key = key(reference);
        let batch = (reference.clone(), std::mem::take(events));
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= MOST_WAITING {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            let dropped = self.dropped.fetch_add(1, Ordering::SeqCst) + 1;
            if dropped % 1000 == 1 {
                tracing::warn!(
                    "{dropped} batch(es) of Events dropped so far: {MOST_WAITING} were waiting to be published"
                );
            }
            return;
        }
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        // A queue in the map has a task that will read it: sending under the lock cannot race
        // its removal.
        let batch = match queues.get(&key) {
            Some(queue) => match queue.send(batch) {
                Ok(()) => return,
                Err(returned) => returned.0,
            },
            None => batch,
        };
        let (queue, batches) = unbounded_channel();
        // The receiver is held just below: this send cannot fail.
        let _ = queue.send(batch);
        queues.insert(key.clone(), queue);
        drop(queues);
        let drain = self.clone().drain(key, batches);
        match &self.runtime {
            Some(runtime) => drop(runtime.spawn(drain)),
            None => drop(tokio::spawn(drain)),
        }
    }

    /// Publishes one object's batches in order until its queue is empty, then retires it.
    async fn drain(self: Arc<Self>, key: String, mut batches: UnboundedReceiver<Batch>) {
        loop {
            let batch = match batches.try_recv() {
                Ok(batch) => batch,
                Err(_) => {
                    let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
                    match batches.try_recv() {
                        Ok(batch) => batch,
                        Err(_) => {
                            queues.remove(&key);
                            return;
                        }
                    }
                }
            };
            self.publish(batch).await;
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            self.done.notify_waiters();
        }
    }

    async fn publish(&self, (reference, events): Batch) {
        let recorder = Recorder::new(self.client.clone(), self.reporter.clone());
        for (type_, reason, note) in events {
            let ev = Event {
                type_,
                reason,
                note: Some(fit_note(note)),
                action: "Reconcile".into(),
                secondary: None,
            };
            // Closed never (the semaphore lives as long as the publisher).
            let Ok(_post) = self.posts.acquire().await else {
                return;
            };
            match tokio::time::timeout(PUBLISH_TIMEOUT, recorder.publish(&ev, &reference)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!("publishing an event failed: {e}"),
                Err(_) => tracing::debug!("publishing an event took over {PUBLISH_TIMEOUT:?}"),
            }
        }
    }

    /// Waits until every batch handed over so far is published (or given up), or `limit`
    /// passed; whether they all were. For a clean stop, and for tests that read the Events.
    pub async fn flush(&self, limit: Duration) -> bool {
        tokio::time::timeout(limit, async {
            loop {
                let done = self.done.notified();
                if self.waiting.load(Ordering::SeqCst) == 0 {
                    return;
                }
                done.await;
            }
        })
        .await
        .is_ok()
    }
}

/// `note` cut to what the API server takes (a longer one is refused and the Event lost), at a
/// character boundary, with an ellipsis where it was cut.
fn fit_note(note: String) -> String {
    if note.len() <= NOTE_MAX_BYTES {
        return note;
    }
    let room = NOTE_MAX_BYTES - '…'.len_utf8();
    let end = note
        .char_indices()
        .map(|(i, c)| i + c.len_utf8())
        .take_while(|end| *end <= room)
        .last()
        .unwrap_or(0);
    let mut fit = note.get(..end).unwrap_or_default().to_string();
    fit.push('…');
    fit
}

/// The queue an object's Events go through.
fn key(reference: &ObjectReference) -> String {
    match &reference.uid {
        Some(uid) => uid.clone(),
        None => format!(
            "{}/{}/{}",
            reference.kind.as_deref().unwrap_or_default(),
            reference.namespace.as_deref().unwrap_or_default(),
            reference.name.as_deref().unwrap_or_default()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{fake_api, FakeApi};
    use kube::runtime::events::EventType;

    fn reporter() -> Reporter {
        Reporter {
            controller: "netbench-operator".into(),
            instance: None,
        }
    }

    fn object(name: &str) -> ObjectReference {
        ObjectReference {
            kind: Some("IngressBenchmark".into()),
            namespace: Some("team-a".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        }
    }

    fn events(reasons: &[&str]) -> Vec<PendingEvent> {
        reasons
            .iter()
            .map(|r| (EventType::Normal, r.to_string(), format!("note {r}")))
            .collect()
    }

    /// The reasons of the Events POSTed about `name`, in the order the server got them.
    fn posted(api: &FakeApi, name: &str) -> Vec<String> {
        api.requests()
            .iter()
            .filter(|l| l.starts_with("POST /apis/events.k8s.io/"))
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l[l.find('{')?..]).ok())
            .filter(|e| e["regarding"]["name"] == name)
            .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_objects_events_are_published_in_the_order_handed_over() {
        let api = FakeApi::default();
        let client = api.client(|seen| (201, serde_json::from_str(&seen.body).unwrap()));
        let publisher = Publisher::new(client, reporter());
        let (a, b) = (object("a"), object("b"));
        for (reference, reasons) in [
            (&a, &["Pending", "Preparing"][..]),
            (&b, &["Pending"]),
            (&a, &["Running"]),
            (&b, &["Preparing", "Running"]),
            (&a, &["Collecting", "Succeeded"]),
        ] {
            let mut handed = events(reasons);
            publisher.send(reference, &mut handed);
            assert!(handed.is_empty(), "send takes the events");
        }
        assert!(publisher.flush(Duration::from_secs(10)).await);
        assert_eq!(
            posted(&api, "a"),
            ["Pending", "Preparing", "Running", "Collecting", "Succeeded"]
        );
        assert_eq!(posted(&api, "b"), ["Pending", "Preparing", "Running"]);
        // Every queue is retired once empty (by its task, just after its last batch was
        // published); a later hand-over starts a new one.
        let retired = async {
            while !publisher.queues.lock().unwrap().is_empty() {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), retired)
            .await
            .expect("queues retired");
        publisher.send(&a, &mut events(&["Deleted"]));
        assert!(publisher.flush(Duration::from_secs(10)).await);
        assert_eq!(
            posted(&api, "a").last().map(String::as_str),
            Some("Deleted")
        );
    }

    #[test]
    fn a_note_is_cut_to_what_the_api_server_takes_at_a_character_boundary() {
        assert_eq!(fit_note("short".into()), "short");
        let exact = "x".repeat(NOTE_MAX_BYTES);
        assert_eq!(fit_note(exact.clone()), exact);
        for long in [
            "x".repeat(5000),
            "é".repeat(3000),
            format!("x{}", "€".repeat(2000)),
        ] {
            let fit = fit_note(long.clone());
            assert!(fit.len() <= NOTE_MAX_BYTES, "{} bytes", fit.len());
            assert!(fit.len() > NOTE_MAX_BYTES - 8, "{} bytes", fit.len());
            assert!(fit.ends_with('…'));
            assert!(long.starts_with(fit.trim_end_matches('…')));
        }
    }

    #[tokio::test]
    async fn a_refused_event_is_given_up_and_the_rest_still_go() {
        let api = FakeApi::default();
        // The API server refuses the first Event about "a" and accepts everything else.
        let refused = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let client = api.client(move |seen| {
            if seen.body.contains("\"First\"") && !refused.swap(true, Ordering::SeqCst) {
                return (500, fake_api::status(500, "InternalError"));
            }
            (201, serde_json::from_str(&seen.body).unwrap())
        });
        let publisher = Publisher::new(client, reporter());
        publisher.send(&object("a"), &mut events(&["First", "Second"]));
        assert!(publisher.flush(Duration::from_secs(10)).await);
        // The refused one was sent once (not retried), and the next one went after it.
        let sent: Vec<_> = api
            .requests()
            .iter()
            .filter(|l| l.starts_with("POST /apis/events.k8s.io/"))
            .map(|l| l.contains("\"First\""))
            .collect();
        assert_eq!(sent, [true, false]);
        assert_eq!(publisher.waiting.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn nothing_handed_over_is_nothing_to_wait_for() {
        let api = FakeApi::default();
        let publisher = Publisher::new(api.failing(), reporter());
        publisher.send(&object("a"), &mut vec![]);
        assert!(publisher.flush(Duration::from_millis(1)).await);
        assert!(api.requests().is_empty());
    }

    #[tokio::test]
    async fn beyond_the_most_waiting_new_events_are_dropped_not_kept() {
        let api = FakeApi::default();
        let publisher = Publisher::new(api.failing(), reporter());
        // As if MOST_WAITING hand-overs were waiting (their POSTs slow).
        publisher.waiting.store(MOST_WAITING, Ordering::SeqCst);
        publisher.send(&object("a"), &mut events(&["Pending"]));
        assert_eq!(publisher.dropped.load(Ordering::SeqCst), 1);
        assert_eq!(publisher.waiting.load(Ordering::SeqCst), MOST_WAITING);
        assert!(
            publisher.queues.lock().unwrap().is_empty(),
            "nothing queued"
        );
        // Room again: published.
        publisher.waiting.store(0, Ordering::SeqCst);
        publisher.send(&object("a"), &mut events(&["Running"]));
        assert!(publisher.flush(Duration::from_secs(10)).await);
        assert_eq!(api.requests().len(), 1, "{:?}", api.requests());
    }
}
