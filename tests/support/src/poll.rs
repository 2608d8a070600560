//! Polling for what no watch can report (lists, logs, /metrics, a node's devices), always with a
//! deadline. A single Kubernetes object's state is awaited with `k8s::wait_for` (a watch).

use std::time::Duration;

/// How often [`eventually`] asks.
pub const EVERY: Duration = Duration::from_millis(500);

/// Calls `probe` every [`EVERY`] until it returns `Ok`, and returns that value. `Err` means
/// "not yet" and says what was seen; once `timeout` has passed, the last such answer is the
/// panic message (with how long it waited).
pub async fn eventually<T>(timeout: Duration, probe: impl AsyncFnMut() -> Result<T, String>) -> T {
    eventually_every(timeout, EVERY, probe).await
}

/// [`eventually`], asking every `every`.
pub async fn eventually_every<T>(
    timeout: Duration,
    every: Duration,
    mut probe: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match probe().await {
            Ok(done) => return done,
            Err(last) => assert!(
                tokio::time::Instant::now() < deadline,
                "{last} (waited {timeout:?})"
            ),
        }
        tokio::time::sleep(every).await;
    }
}
