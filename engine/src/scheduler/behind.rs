//! The batches the scheduler writes behind it: while one is on its way to the
//! disk, the scheduler goes on waiting for stages to end, so a stage that ends
//! meanwhile has its end queued and its slot filled at once instead of after
//! the batch's syncs. Writes stay in one order, one batch at a time
//! (`store/batch.rs`); only the scheduler's own wait moves. A stage that reads
//! records at its start, and an agent stage, still flush before they begin,
//! behind whatever batch is being written.

use std::sync::Arc;

use tokio::task::JoinSet;

use crate::store::{RunHandle, StoreError};

#[derive(Default)]
pub(super) struct Flushes {
    out: JoinSet<Result<(), StoreError>>,
}

impl Flushes {
    /// Write everything queued so far on a blocking thread, unless a batch
    /// started before has yet to take the queue (it takes what is queued now).
    pub(super) fn start(&mut self, run: &Arc<RunHandle>) {
        if let Some(job) = run.flush_job() {
            self.out.spawn_blocking(job);
        }
    }

    /// Whether a batch started here has not been seen to end.
    pub(super) fn any_out(&self) -> bool {
        !self.out.is_empty()
    }

    /// The next batch to end, and whether it was written. Only when
    /// [`any_out`](Self::any_out): otherwise it is ready at once.
    pub(super) async fn next_ended(&mut self) -> Result<(), StoreError> {
        match self.out.join_next().await {
            Some(joined) => joined.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic())),
            None => Ok(()),
        }
    }

    /// Waits for every batch out; the first failure, if any.
    pub(super) async fn settle(&mut self) -> Result<(), StoreError> {
        let mut first = Ok(());
        while self.any_out() {
            let ended = self.next_ended().await;
            if first.is_ok() {
                first = ended;
            }
        }
        first
    }
}
