//! A future run on a thread of its own, on a single-threaded tokio runtime nothing else uses.
//! What runs there is polled as soon as it is woken, not after the tasks queued on the shared
//! runtime's threads: a controller whose reconciles each wait a short grace (`controller::behind`)
//! then return when the grace ends, even while hundreds of works keep the shared threads busy.

use std::future::Future;

/// The thread ended without an outcome: its runtime could not be built, or the future panicked.
#[derive(Debug, thiserror::Error)]
#[error("the thread {0} ended without an outcome (its runtime failed to start, or it panicked)")]
pub struct ThreadLost(pub String);

/// Runs `fut` to its end on a new thread named `name`, with a runtime of its own (time, I/O
/// and signals). Dropping the returned future stops `fut` and ends the thread: nothing goes on
/// behind a caller that gave up. Tasks `fut` spawns with `tokio::spawn` run on that thread too;
/// spawn heavy work on another runtime's handle.
pub async fn on_own_thread<F>(name: &str, fut: F) -> Result<F::Output, ThreadLost>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (out_tx, out_rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let lost = || ThreadLost(name.to_string());
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                tokio::select! {
                    // First: once the caller dropped its future (its sender with it), nothing
                    // more of `fut` is polled.
                    biased;
                    _ = stop_rx => {}
                    out = fut => { let _ = out_tx.send(out); }
                }
            });
        })
        .map_err(|_| lost())?;
    let _stop_when_dropped = stop_tx;
    out_rx.await.map_err(|_| lost())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_future_runs_on_its_named_thread_and_its_output_comes_back() {
        let out = on_own_thread("nb-test-own", async {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            std::thread::current().name().map(str::to_string)
        })
        .await
        .unwrap();
        assert_eq!(out.as_deref(), Some("nb-test-own"));
    }

    #[tokio::test]
    async fn dropping_the_caller_stops_the_future() {
        let (held_tx, held_rx) = tokio::sync::oneshot::channel::<()>();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
        let caller = tokio::spawn(on_own_thread("nb-test-stop", async move {
            let _held = held_tx;
            let _ = started_tx.send(());
            std::future::pending::<()>().await
        }));
        started_rx.await.unwrap();
        caller.abort();
        let gone = tokio::time::timeout(std::time::Duration::from_secs(10), held_rx).await;
        assert!(
            matches!(gone, Ok(Err(_))),
            "the future was dropped: {gone:?}"
        );
    }

    #[tokio::test]
    async fn a_panic_is_an_error_not_a_hang() {
        let out = on_own_thread("nb-test-panic", async {
            panic!("broken");
        })
        .await;
        let err = out.unwrap_err();
        assert!(err.to_string().contains("nb-test-panic"), "{err}");
    }
}
