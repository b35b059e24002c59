//! Ctrl-C as the CLI wants it: the first asks for a graceful cancel, the second
//! kills at once (DESIGN §4).

use tokio::signal::unix::{signal, SignalKind};
use tokio::task::JoinHandle;

use super::cancel::{CancelLevel, CancelToken};

/// Routes SIGINT into `cancel`. The handler is registered before this returns, so
/// a SIGINT right after the call is never lost to the default action; from then on
/// SIGINT no longer ends the process by itself. Must be called inside a runtime.
pub fn install_ctrl_c(cancel: CancelToken) -> std::io::Result<JoinHandle<()>> {
    let mut interrupts = signal(SignalKind::interrupt())?;
    Ok(tokio::spawn(async move {
        while interrupts.recv().await.is_some() {
            if cancel.level() == CancelLevel::None {
                tracing::info!("interrupted: cancelling gracefully (press Ctrl-C again to kill)");
                cancel.cancel_graceful();
            } else {
                tracing::info!("interrupted again: killing every running process");
                cancel.cancel_now();
                break;
            }
        }
    }))
}
