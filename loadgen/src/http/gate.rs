//! The start gate: load threads wait until all are ready, then start together with the run's
//! clock (or are told to give up).

use std::sync::{Condvar, Mutex, MutexGuard};

use super::engine::Clock;

/// Holds the load threads until all are ready, then releases them with the run's clock (or
/// with `None` to abort).
#[derive(Default)]
pub(crate) struct StartGate {
    state: Mutex<GateState>,
    changed: Condvar,
}

/// (threads arrived, release: `None` = closed, `Some(None)` = aborted, `Some(Some(..))` = go).
type GateState = (usize, Option<Option<Clock>>);

impl StartGate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn arrive_and_wait(&self) -> Option<Clock> {
        let mut s = self.lock();
        s.0 += 1;
        self.changed.notify_all();
        loop {
            if let Some(released) = s.1 {
                return released;
            }
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    pub(crate) fn wait_for_arrivals(&self, n: usize) {
        let mut s = self.lock();
        while s.0 < n {
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    pub(crate) fn open(&self, clock: Option<Clock>) {
        self.lock().1 = Some(clock);
        self.changed.notify_all();
    }
}
