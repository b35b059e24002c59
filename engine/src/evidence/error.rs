use std::path::PathBuf;

/// Why evidence could not be gathered.
#[derive(Debug, thiserror::Error)]
pub enum EvidenceError {
    #[error("failed to run git {args} in {root}")]
    GitSpawn {
        args: String,
        root: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to run git {args} in {root}: {stderr}")]
    GitFailed {
        args: String,
        root: PathBuf,
        stderr: String,
    },
    #[error("failed to parse the output of git {args} in {root}: {detail}")]
    GitOutput {
        args: String,
        root: PathBuf,
        detail: String,
    },
    #[error("failed to hash {path}")]
    Hash {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to prepare a temporary git index")]
    TempIndex {
        #[source]
        source: std::io::Error,
    },
    #[error(
        "failed to start: the working tree has {} uncommitted change(s) ({}); commit or stash them, or pass --allow-dirty",
        paths.len(),
        summarize(paths)
    )]
    DirtyTree { paths: Vec<String> },
}

fn summarize(paths: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut s = paths
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > SHOWN {
        s.push_str(&format!(", and {} more", paths.len() - SHOWN));
    }
    s
}
