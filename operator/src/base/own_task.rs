//! A stream polled in a task of its own, on the runtime that made it. What its polls cost (a
//! watch decoding every event's JSON, a reflector updating its store) then runs there, not on
//! the thread that consumes it: a controller on a thread of its own (`base::own_thread`) only
//! routes the events, and its reconciles are not queued behind their decoding.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::task::AbortOnDropHandle;

/// The items of `stream`, in order, with at most `ahead` of them waiting for the consumer.
/// The task ends with the stream, or when the returned stream is dropped; a panic in it is
/// the consumer's, as it was when the consumer polled the stream itself.
pub fn in_own_task<S>(stream: S, ahead: usize) -> OwnTask<S::Item>
where
    S: Stream + Send + 'static,
    S::Item: Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(ahead.max(1));
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            if tx.send(item).await.is_err() {
                break;
            }
        }
    });
    OwnTask {
        items: ReceiverStream::new(rx),
        task: Some(AbortOnDropHandle::new(task)),
    }
}

/// See [`in_own_task`].
pub struct OwnTask<T> {
    items: ReceiverStream<T>,
    /// None once the stream ended (polled again, it stays ended).
    task: Option<AbortOnDropHandle<()>>,
}

impl<T> Stream for OwnTask<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = &mut *self;
        let Some(task) = this.task.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(&mut this.items).poll_next(cx) {
            Poll::Ready(None) => match Pin::new(task).poll(cx) {
                Poll::Ready(ended) => {
                    this.task = None;
                    match ended {
                        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                        _ => Poll::Ready(None),
                    }
                }
                Poll::Pending => Poll::Pending,
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn items_come_in_order_and_the_stream_is_polled_elsewhere() {
        let polled_on = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = polled_on.clone();
        let source = futures::stream::iter(0..1000).inspect(move |_| {
            seen.lock().unwrap().push(tokio::task::try_id());
        });
        let items: Vec<u32> = in_own_task(source, 8).collect().await;
        assert_eq!(items, (0..1000).collect::<Vec<_>>());
        let ids = polled_on.lock().unwrap();
        let own = ids.first().copied().flatten();
        assert!(own.is_some(), "polled inside a task");
        assert!(ids.iter().all(|id| *id == own), "one task polls it");
        assert_ne!(own, tokio::task::try_id(), "not the consumer's task");
    }

    #[tokio::test]
    async fn once_ended_it_stays_ended() {
        let mut own = in_own_task(futures::stream::iter([7]), 1);
        assert_eq!(own.next().await, Some(7));
        assert_eq!(own.next().await, None);
        assert_eq!(own.next().await, None);
    }

    #[tokio::test]
    async fn dropping_it_stops_the_task() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        // A stream that never ends and holds `tx` until its task is gone.
        let source = futures::stream::pending::<u32>().chain(futures::stream::once(async move {
            let _held = tx;
            0
        }));
        let own = in_own_task(source, 1);
        drop(own);
        tokio::time::timeout(std::time::Duration::from_secs(10), rx)
            .await
            .expect("the task was aborted and dropped its stream")
            .unwrap_err();
    }

    #[tokio::test]
    #[should_panic(expected = "a broken watch")]
    async fn a_panic_in_the_stream_reaches_the_consumer() {
        let source = futures::stream::iter([1, 2]).map(|i| {
            if i == 2 {
                panic!("a broken watch");
            }
            i
        });
        let mut own = in_own_task(source, 4);
        assert_eq!(own.next().await, Some(1));
        own.next().await;
    }
}
