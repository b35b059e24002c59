use std::io;

/// Why the supervisor could not run a process or could not keep its output.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    /// The program is not an executable file, neither as a path nor in `PATH`.
    #[error("failed to find executable `{program}`")]
    NotFound { program: String },
    /// Cancellation came before the process was started; nothing was spawned.
    #[error("failed to start `{program}`: the run is being cancelled")]
    CancelledBeforeSpawn { program: String },
    #[error("failed to start `{program}`")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
    /// The caller withheld the process's input (its start could not be
    /// recorded, or what it was to act on was refused); the process group
    /// was killed before it got any.
    #[error(
        "failed to give `{program}` its input: {reason}; it was stopped before it was given any"
    )]
    Withheld { program: String, reason: String },
    /// Cancellation came while the caller held the process's input
    /// (`run_until_ended`'s `on_spawn`); the process group was killed before
    /// it got any.
    #[error("failed to give `{program}` its input: the run is being cancelled; it was stopped before it was given any")]
    CancelledBeforeInput { program: String },
    /// Writing or reading a stream failed; the process group was stopped.
    #[error("failed to capture output into {into}")]
    Capture {
        into: String,
        #[source]
        source: io::Error,
    },
    #[error("failed to wait for process {pid}")]
    Wait {
        pid: u32,
        #[source]
        source: io::Error,
    },
}
