//! Clean-up that nothing of a run waits for (pods, report objects), done by a task of its own
//! so that no reconcile waits for it, tried a few times, and said when it failed for good.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

/// Tries at most this often (1 s, then 2 s apart).
pub const TRIES: u32 = 3;

/// Runs `attempt` in a task of its own until it succeeds, at most [`TRIES`] times, each bounded
/// by `timeout`. When every try failed, logs the last error (`what` failed) and calls `failed`
/// (the caller makes the work come again).
pub fn spawn<F, Fut, E>(
    what: String,
    timeout: Duration,
    attempt: F,
    failed: impl FnOnce() + Send + 'static,
) where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), E>> + Send,
    E: Display,
{
    tokio::spawn(async move {
        for n in 1..=TRIES {
            let last = match tokio::time::timeout(timeout, attempt()).await {
                Ok(Ok(())) => return,
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("no answer within {}s", timeout.as_secs()),
            };
            if n == TRIES {
                tracing::warn!("{what} failed {TRIES} times, the last: {last}");
            } else {
                tokio::time::sleep(Duration::from_secs(u64::from(n))).await;
            }
        }
        failed();
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    /// `spawn` of an attempt that fails `failing` times; (tries made, whether `failed` ran).
    async fn tried(failing: u32, hangs: bool) -> (u32, bool) {
        let tries = Arc::new(AtomicU32::new(0));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let counted = tries.clone();
        let attempt = move || {
            let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                if hangs {
                    std::future::pending::<()>().await;
                }
                if n <= failing {
                    Err("refused")
                } else {
                    Ok(())
                }
            }
        };
        spawn("x".into(), Duration::from_secs(5), attempt, move || {
            let _ = tx.send(());
        });
        // Ends when `failed` ran, or when the task ended and dropped it uncalled.
        let failed = rx.await.is_ok();
        (tries.load(Ordering::SeqCst), failed)
    }

    #[tokio::test(start_paused = true)]
    async fn tries_until_it_succeeds_then_stops() {
        assert_eq!(tried(0, false).await, (1, false));
        assert_eq!(tried(2, false).await, (3, false));
    }

    #[tokio::test(start_paused = true)]
    async fn failing_or_hanging_for_good_is_said_once() {
        assert_eq!(tried(9, false).await, (TRIES, true));
        assert_eq!(tried(0, true).await, (TRIES, true));
    }
}
