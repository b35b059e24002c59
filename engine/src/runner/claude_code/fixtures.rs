//! Test access to the captured CLI outputs under `testkit/fixtures/claude-code/`.

use std::path::PathBuf;

pub(crate) fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testkit/fixtures/claude-code")
}

pub(crate) fn version_file(version: &str, name: &str) -> String {
    let path = fixture_dir().join("versions").join(version).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

pub(crate) fn help_text(version: &str) -> String {
    version_file(version, "help.txt")
}

pub(crate) const CAPTURED_VERSIONS: [&str; 4] = ["1.0.0", "2.0.50", "2.1.100", "2.1.332"];

/// The capabilities detected from a captured version's `--version` and `--help`.
pub(crate) fn captured(version: &str) -> super::capabilities::Capabilities {
    use super::capabilities::{parse_version, Capabilities};
    use super::help::HelpText;
    let v = parse_version(&version_file(version, "version.txt"));
    Capabilities::detect(v, &HelpText::parse(&help_text(version)))
}
