//! specbridge stage kinds: `generate` (read-only spec generation), `execute` (task
//! execution with evidence) and `check` (a command gate), and the executor that the
//! engine's scheduler drives.

pub mod agent;
pub mod attempt;
mod before_snapshot;
pub mod check;
pub mod confine;
pub mod context;
pub mod continuation;
pub mod error;
pub mod execute;
pub mod executor;
pub mod fanout;
pub mod flow;
pub mod generate;
pub mod init;
pub mod input_hash;
pub mod partial_work;
pub mod previous;
pub mod prompt;
pub mod reverify;
pub mod schema;
pub mod secrets;
pub mod session;
pub mod snapshot_ahead;
pub mod store_check;
pub mod upstream;
pub mod verify;
pub mod working_tree;

pub use agent::{AgentSetup, DetectedRunner};
pub use context::RunContext;
pub use error::StageError;
pub use executor::PipelineExecutor;
pub use session::{RunSession, SessionError};

/// An argv as one line a user could paste into a shell (for display only: nothing
/// specbridge runs goes through a shell).
pub fn shell_words(argv: &[String]) -> String {
    // One buffer for the line: a dry run of thousands of stages prints one each.
    let mut line = String::with_capacity(argv.iter().map(|a| a.len() + 3).sum());
    for (i, a) in argv.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        let plain = !a.is_empty()
            && a.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+%^".contains(&b));
        if plain {
            line.push_str(a);
        } else {
            line.push('\'');
            line.push_str(&a.replace('\'', r"'\''"));
            line.push('\'');
        }
    }
    line
}

pub(crate) use specbridge_engine::error_chain;

pub(crate) fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    specbridge_engine::time::format_rfc3339(t)
}

#[cfg(test)]
mod shell_words_tests {
    use super::shell_words;

    #[test]
    fn words_a_shell_would_split_or_expand_are_single_quoted() {
        let argv = |words: &[&str]| words.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(shell_words(&argv(&[])), "");
        assert_eq!(
            shell_words(&argv(&["cargo", "test", "--lib", "a=b/c.d:e,f@g+h%i^j_k"])),
            "cargo test --lib a=b/c.d:e,f@g+h%i^j_k"
        );
        assert_eq!(
            shell_words(&argv(&["sh", "-c", "true && touch out/s1", ""])),
            "sh -c 'true && touch out/s1' ''"
        );
        assert_eq!(
            shell_words(&argv(&["echo", "it's", "$HOME"])),
            r"echo 'it'\''s' '$HOME'"
        );
    }
}
