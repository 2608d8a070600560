//! Tests only: the log lines a piece of async code writes, in the operator's two formats
//! (plain text or JSON, as `main` sets them up), so a test can check what a line carries.

use std::future::Future;
use std::io::Write;
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `f` on this thread with a subscriber writing to a buffer (debug level and up) and
/// returns its result and the lines written. Needs a current-thread runtime (`#[tokio::test]`)
/// so every poll of `f` sees the subscriber.
pub async fn capture<T>(json: bool, f: impl Future<Output = T>) -> (T, Vec<String>) {
    // One capture at a time: creating or dropping a dispatcher makes tracing recompute the
    // global max level from the live ones, and a capture ending on another test's thread could
    // turn this one's lines off mid-way (a flake seen under load).
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _serial = ONE_AT_A_TIME.lock().await;
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let builder = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone());
    let dispatch = if json {
        tracing::Dispatch::new(builder.json().finish())
    } else {
        tracing::Dispatch::new(builder.finish())
    };
    let out = {
        let _guard = tracing::dispatcher::set_default(&dispatch);
        // A callsite another test's thread registered while this dispatcher was being
        // registered can keep a stale "never" interest (a flake seen under load): recompute
        // every callsite's interest and the max level now that this dispatcher is live.
        tracing::callsite::rebuild_interest_cache();
        f.await
    };
    drop(dispatch);
    let text = String::from_utf8_lossy(&buffer.0.lock().unwrap()).into_owned();
    (out, text.lines().map(str::to_string).collect())
}

/// The first of `lines` that contains `needle`; fails the test, listing them all, when none does.
pub fn line_with<'a>(lines: &'a [String], needle: &str) -> &'a str {
    lines
        .iter()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in {lines:#?}"))
}
