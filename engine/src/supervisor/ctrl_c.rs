//! Ctrl-C, SIGTERM and SIGHUP as the CLI wants them: the first asks for a graceful
//! cancel, the second kills at once (docs/stage-kinds.md). SIGTERM is what `timeout`, CI
//! runners and `docker stop` send, SIGHUP what a closed terminal sends: each must
//! leave a recorded, resumable run, exactly like Ctrl-C.

use tokio::signal::unix::{signal, SignalKind};
use tokio::task::JoinHandle;

use super::cancel::{CancelLevel, CancelToken};

/// Routes SIGINT, SIGTERM and SIGHUP into `cancel`. The handlers are registered
/// before this returns, so a signal right after the call is never lost to the
/// default action; from then on none of them ends the process by itself. Must be
/// called inside a runtime.
pub fn install_cancel_signals(cancel: CancelToken) -> std::io::Result<JoinHandle<()>> {
    let mut interrupts = signal(SignalKind::interrupt())?;
    let mut terminates = signal(SignalKind::terminate())?;
    let mut hangups = signal(SignalKind::hangup())?;
    Ok(tokio::spawn(async move {
        loop {
            let name = tokio::select! {
                s = interrupts.recv() => s.map(|_| "SIGINT"),
                s = terminates.recv() => s.map(|_| "SIGTERM"),
                s = hangups.recv() => s.map(|_| "SIGHUP"),
            };
            let Some(name) = name else { break };
            if cancel.level() == CancelLevel::None {
                tracing::info!("{name}: cancelling gracefully (a second signal kills at once)");
                cancel.cancel_graceful();
            } else {
                tracing::info!("{name} again: killing every running process");
                cancel.cancel_now();
                break;
            }
        }
    }))
}
