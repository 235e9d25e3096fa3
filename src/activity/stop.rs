//! A request to stop the supervisor's child: made by SIGTERM, SIGINT or SIGHUP to the supervisor
//! (what `activity::stop()` sends), or, in the tests, by another thread. The supervisor awaits it
//! beside the child's exit and the timeout; nothing polls a flag.
//!
//! It must never lose a request that came before anyone awaited it: the flag stays set, and the
//! wake-up is kept until it is taken.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::Notify;

#[derive(Debug, Default)]
pub(super) struct StopRequest {
    requested: AtomicBool,
    wake: Notify,
}

impl StopRequest {
    /// Ask the supervisor to stop; any thread may call it, any number of times.
    pub(super) fn request(&self) {
        self.requested.store(true, Ordering::SeqCst);
        // `notify_one` keeps a permit when nobody waits yet, so a request made between a look at
        // the flag and the await is still seen.
        self.wake.notify_one();
    }

    pub(super) fn is_requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// Ready once a stop was requested (at once if it already was).
    pub(super) async fn requested(&self) {
        while !self.is_requested() {
            self.wake.notified().await;
        }
    }
}

/// The signals that ask a supervisor process to stop. Listening starts when this is made: it
/// replaces the default action (death), so it must exist before anything can send them.
pub(super) struct StopSignals([Signal; 3]);

impl StopSignals {
    /// Must be called on the supervisor's runtime.
    pub(super) fn listen() -> std::io::Result<StopSignals> {
        Ok(StopSignals([
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
            signal(SignalKind::hangup())?,
        ]))
    }

    /// Turn the first of these signals into a request on `stop`; never ends.
    pub(super) async fn forward(mut self, stop: &StopRequest) -> Infallible {
        let [term, int, hup] = &mut self.0;
        tokio::select! {
            Some(()) = term.recv() => stop.request(),
            Some(()) = int.recv() => stop.request(),
            Some(()) = hup.recv() => stop.request(),
            // Every stream ended: only a runtime shutting down does that, and then nothing runs.
            else => {}
        }
        std::future::pending().await
    }
}
