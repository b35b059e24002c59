//! Signal routing. Its own test binary: it takes over SIGINT, SIGTERM and SIGHUP for
//! the whole process.

use std::time::Duration;

use nix::sys::signal::{raise, Signal};
use specbridge_engine::supervisor::{install_cancel_signals, CancelLevel, CancelToken};

#[tokio::test]
async fn first_interrupt_cancels_gracefully_and_the_second_at_once() {
    let cancel = CancelToken::new();
    let handler = install_cancel_signals(cancel.clone()).unwrap();
    let bounded = |level| tokio::time::timeout(Duration::from_secs(60), cancel.wait_until(level));

    raise(Signal::SIGINT).unwrap();
    assert_eq!(
        bounded(CancelLevel::Graceful).await.unwrap(),
        CancelLevel::Graceful
    );
    assert_eq!(cancel.level(), CancelLevel::Graceful);

    raise(Signal::SIGINT).unwrap();
    assert_eq!(
        bounded(CancelLevel::Immediate).await.unwrap(),
        CancelLevel::Immediate
    );
    tokio::time::timeout(Duration::from_secs(60), handler)
        .await
        .unwrap()
        .unwrap();

    // SIGTERM and SIGHUP cancel like Ctrl-C; a second signal of another kind
    // still counts as the second. (One test: the handlers are process-wide.)
    let cancel = CancelToken::new();
    let handler = install_cancel_signals(cancel.clone()).unwrap();
    let bounded = |level| tokio::time::timeout(Duration::from_secs(60), cancel.wait_until(level));

    raise(Signal::SIGTERM).unwrap();
    assert_eq!(
        bounded(CancelLevel::Graceful).await.unwrap(),
        CancelLevel::Graceful
    );
    assert_eq!(cancel.level(), CancelLevel::Graceful);

    raise(Signal::SIGHUP).unwrap();
    assert_eq!(
        bounded(CancelLevel::Immediate).await.unwrap(),
        CancelLevel::Immediate
    );
    tokio::time::timeout(Duration::from_secs(60), handler)
        .await
        .unwrap()
        .unwrap();
}
