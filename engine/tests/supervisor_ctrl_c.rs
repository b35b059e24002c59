//! Signal routing. Its own test binary: it takes over SIGINT, SIGTERM and SIGHUP for
//! the whole process.

use std::time::Duration;

use nix::sys::signal::{raise, Signal};
use specbridge_engine::supervisor::{install_cancel_signals, CancelLevel, CancelToken};

/// The first signal cancels gracefully, the second at once; the handler then ends.
async fn first_cancels_and_second_kills(first: Signal, second: Signal) {
    let cancel = CancelToken::new();
    let handler = install_cancel_signals(cancel.clone()).unwrap();
    let bounded = |level| tokio::time::timeout(Duration::from_secs(60), cancel.wait_until(level));

    raise(first).unwrap();
    assert_eq!(
        bounded(CancelLevel::Graceful).await.unwrap(),
        CancelLevel::Graceful
    );
    assert_eq!(cancel.level(), CancelLevel::Graceful);

    raise(second).unwrap();
    assert_eq!(
        bounded(CancelLevel::Immediate).await.unwrap(),
        CancelLevel::Immediate
    );
    tokio::time::timeout(Duration::from_secs(60), handler)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn first_interrupt_cancels_gracefully_and_the_second_at_once() {
    first_cancels_and_second_kills(Signal::SIGINT, Signal::SIGINT).await;
    // SIGTERM and SIGHUP cancel like Ctrl-C; a second signal of another kind
    // still counts as the second. (One test: the handlers are process-wide.)
    first_cancels_and_second_kills(Signal::SIGTERM, Signal::SIGHUP).await;
}
