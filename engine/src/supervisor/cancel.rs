//! Run-wide cancellation with two levels, as Ctrl-C gives them: the first asks
//! for a graceful stop, the second for an immediate one.

use std::sync::Arc;

use tokio::sync::watch;

/// How hard a cancellation is; levels only ever go up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CancelLevel {
    None,
    /// SIGTERM to every running group, SIGKILL after its kill grace.
    Graceful,
    /// SIGKILL to every running group now.
    Immediate,
}

/// A cancellation shared by everything in a run; clones observe the same level.
#[derive(Debug, Clone)]
pub struct CancelToken {
    level: Arc<watch::Sender<CancelLevel>>,
}

impl Default for CancelToken {
    fn default() -> Self {
        Self::new()
    }
}

impl CancelToken {
    pub fn new() -> Self {
        let (level, _) = watch::channel(CancelLevel::None);
        Self {
            level: Arc::new(level),
        }
    }

    pub fn cancel_graceful(&self) {
        self.raise(CancelLevel::Graceful);
    }

    pub fn cancel_now(&self) {
        self.raise(CancelLevel::Immediate);
    }

    pub fn level(&self) -> CancelLevel {
        *self.level.borrow()
    }

    pub fn is_cancelled(&self) -> bool {
        self.level() > CancelLevel::None
    }

    /// Resolves once any cancellation has been asked for, with its level.
    pub async fn wait(&self) -> CancelLevel {
        self.wait_until(CancelLevel::Graceful).await
    }

    /// Resolves once the level is at least `at_least`, with the level then.
    pub async fn wait_until(&self, at_least: CancelLevel) -> CancelLevel {
        let mut seen = self.level.subscribe();
        // The sender lives as long as `self`, so the channel cannot close here.
        let reached = seen
            .wait_for(|level| *level >= at_least)
            .await
            .map(|level| *level);
        match reached {
            Ok(level) => level,
            Err(_) => std::future::pending().await,
        }
    }

    fn raise(&self, to: CancelLevel) {
        self.level.send_if_modified(|level| {
            let raised = *level < to;
            if raised {
                *level = to;
            }
            raised
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn levels_only_go_up_and_are_shared_by_clones() {
        let token = CancelToken::new();
        let clone = token.clone();
        assert_eq!(clone.level(), CancelLevel::None);
        token.cancel_now();
        clone.cancel_graceful();
        assert_eq!(token.level(), CancelLevel::Immediate);
        assert_eq!(clone.wait().await, CancelLevel::Immediate);
    }

    #[tokio::test]
    async fn wait_resolves_when_another_task_cancels() {
        let token = CancelToken::new();
        let waiter = tokio::spawn({
            let token = token.clone();
            async move { token.wait_until(CancelLevel::Immediate).await }
        });
        token.cancel_graceful();
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        token.cancel_now();
        assert_eq!(waiter.await.unwrap(), CancelLevel::Immediate);
    }
}
