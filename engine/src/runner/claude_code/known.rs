//! Detection without starting the CLI, for the versions whose capabilities
//! specbridge knows (docs/claude-code-runner.md, "Known versions").
//!
//! Probing costs two CLI start-ups (`--version`, `--help`: about 380 ms of CPU with
//! 2.1.332), and the detection cache lives in the user's cache folder, so every
//! run in a fresh `HOME` (CI) would pay them. An npm install of
//! `@anthropic-ai/claude-code` says its version in its `package.json`, next to the
//! executable it declares; for a version in [`KNOWN`] the capabilities are the
//! ones the probe's own parser reads from its captured `--help` (built into the
//! binary as JSON), and the real-CLI tests compare them with the installed CLI's
//! `--help`. Anything else — a wrapper script, another package, an unknown
//! version, a package whose native binary was not installed — is probed as before.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::capabilities::Capabilities;

/// The npm package whose `package.json` is trusted for the version.
pub const PACKAGE: &str = "@anthropic-ai/claude-code";

/// How many folders above the executable its `package.json` may be
/// (`<package>/bin/claude.exe`, `<package>/cli.js`).
const MAX_DEPTH: usize = 3;

/// The versions whose capabilities are built in, newest first, each with what
/// the parser a probe uses reads from its captured `--help` (FACTS.md), kept as
/// JSON beside that help. Reading the help at run time compiled the parser's
/// patterns (about 2 ms of every run); the test below parses the captured help
/// and compares, so the JSON and a probe of the same CLI cannot differ.
const BUILT_IN: &[(&str, &str)] = &[(
    "2.1.332",
    include_str!("../../../../testkit/fixtures/claude-code/versions/2.1.332/capabilities.json"),
)];

/// The versions whose capabilities are built in, newest first.
pub const KNOWN: &[&str] = &["2.1.332"];

/// The capabilities the `--help` of a known version lists, as a probe would
/// detect them (compared with the installed CLI by the real-CLI tier).
pub fn capabilities(version: &str) -> Option<Capabilities> {
    parsed()
        .iter()
        .find(|(v, _)| *v == version)
        .map(|(_, caps)| caps.clone())
}

/// Every built-in version's capabilities, read once a process.
fn parsed() -> &'static [(&'static str, Capabilities)] {
    static PARSED: OnceLock<Vec<(&'static str, Capabilities)>> = OnceLock::new();
    PARSED.get_or_init(|| {
        BUILT_IN
            .iter()
            .map(|(version, json)| {
                let caps = serde_json::from_str(json).expect("built-in capabilities are valid");
                (*version, caps)
            })
            .collect()
    })
}

/// The version of the installed package whose declared `claude` executable is
/// `exe` (a canonical path), read from the package's `package.json`; `None` when
/// `exe` is not such an executable.
///
/// The executable must be the one the package declares (so a script placed in a
/// package folder is not taken for the CLI) and, since every built-in version
/// ships a native binary, an ELF file: an install without its native binary
/// leaves a stub that only prints an error, which a probe reports properly.
pub fn installed_version(exe: &Path) -> Option<String> {
    let (dir, manifest) = exe
        .ancestors()
        .skip(1)
        .take(MAX_DEPTH)
        .find_map(|dir| Some((dir, read_manifest(dir)?)))?;
    if manifest.get("name")?.as_str()? != PACKAGE {
        return None;
    }
    let declared = match manifest.get("bin")? {
        serde_json::Value::String(path) => path.as_str(),
        serde_json::Value::Object(bins) => bins.get("claude")?.as_str()?,
        _ => return None,
    };
    let declared: PathBuf = std::fs::canonicalize(dir.join(declared)).ok()?;
    if declared != exe || !is_elf(exe) {
        return None;
    }
    let version = manifest.get("version")?.as_str()?;
    // Only a plain `X.Y.Z` is compared with the table.
    let plain = version.split('.').count() == 3
        && version
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    plain.then(|| version.to_string())
}

/// The built-in capabilities of the CLI at `exe` (canonical), when its version
/// is known.
pub fn detect(exe: &Path) -> Option<Capabilities> {
    capabilities(&installed_version(exe)?)
}

fn read_manifest(dir: &Path) -> Option<serde_json::Value> {
    let bytes = std::fs::read(dir.join("package.json")).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn is_elf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| magic == *b"\x7fELF")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::claude_code::fixtures::{captured, CAPTURED_VERSIONS};

    /// The built-in JSON is what the probe's parser reads from the captured
    /// `--help` (and the real-CLI tier compares it with the installed CLI's).
    /// After capturing a new version, `SPECBRIDGE_BLESS=1` writes its JSON.
    #[test]
    fn the_built_in_table_is_what_the_captured_help_lists() {
        assert_eq!(
            KNOWN.to_vec(),
            BUILT_IN.iter().map(|(v, _)| *v).collect::<Vec<_>>(),
            "every known version has its capabilities"
        );
        let bless = std::env::var_os("SPECBRIDGE_BLESS").is_some();
        for version in KNOWN {
            assert!(
                CAPTURED_VERSIONS.contains(version),
                "{version} not captured"
            );
            let from_help = captured(version);
            if bless {
                let path = format!(
                    "{}/../testkit/fixtures/claude-code/versions/{version}/capabilities.json",
                    env!("CARGO_MANIFEST_DIR")
                );
                let json = serde_json::to_string_pretty(&from_help).unwrap() + "\n";
                std::fs::write(path, json).unwrap();
                continue;
            }
            assert_eq!(
                capabilities(version).as_ref(),
                Some(&from_help),
                "the built-in capabilities of {version} differ from its captured --help; \
                 rerun this test with SPECBRIDGE_BLESS=1"
            );
        }
        if !bless {
            assert_eq!(capabilities("2.1.331"), None);
        }
    }

    /// A fake install: `<dir>/node_modules/@anthropic-ai/claude-code/bin/claude.exe`
    /// with the given bytes, linked from `node_modules/.bin/claude`.
    fn install(dir: &Path, manifest: &str, exe_bytes: &[u8]) -> (PathBuf, PathBuf) {
        let pkg = dir.join("node_modules/@anthropic-ai/claude-code");
        std::fs::create_dir_all(pkg.join("bin")).unwrap();
        std::fs::create_dir_all(dir.join("node_modules/.bin")).unwrap();
        std::fs::write(pkg.join("package.json"), manifest).unwrap();
        let exe = pkg.join("bin/claude.exe");
        std::fs::write(&exe, exe_bytes).unwrap();
        let link = dir.join("node_modules/.bin/claude");
        std::os::unix::fs::symlink("../@anthropic-ai/claude-code/bin/claude.exe", &link).unwrap();
        (link, exe)
    }

    const MANIFEST: &str = r#"{"name": "@anthropic-ai/claude-code", "version": "2.1.332", "bin": {"claude": "bin/claude.exe"}}"#;

    #[test]
    fn the_version_is_read_from_the_package_that_declares_the_executable() {
        let dir = tempfile::tempdir().unwrap();
        let (link, _) = install(dir.path(), MANIFEST, b"\x7fELF and more");
        let exe = std::fs::canonicalize(&link).unwrap();
        assert_eq!(installed_version(&exe).as_deref(), Some("2.1.332"));
        assert_eq!(detect(&exe), capabilities("2.1.332"));
    }

    #[test]
    fn anything_but_the_declared_native_executable_is_not_known() {
        let dir = tempfile::tempdir().unwrap();
        // The stub an install without its native binary leaves behind.
        let (_, exe) = install(dir.path(), MANIFEST, b"#!/usr/bin/env node\n");
        assert_eq!(installed_version(&exe), None, "not a native binary");

        let dir = tempfile::tempdir().unwrap();
        let (_, exe) = install(dir.path(), MANIFEST, b"\x7fELF");
        let other = exe.with_file_name("wrapper");
        std::fs::write(&other, b"\x7fELF").unwrap();
        assert_eq!(installed_version(&other), None, "not the declared bin");

        for manifest in [
            r#"{"name": "claude-code-fork", "version": "2.1.332", "bin": {"claude": "bin/claude.exe"}}"#,
            r#"{"name": "@anthropic-ai/claude-code", "version": "2.1.332-beta.1", "bin": {"claude": "bin/claude.exe"}}"#,
            r#"{"name": "@anthropic-ai/claude-code", "version": "2.1.332"}"#,
            "not json",
        ] {
            let dir = tempfile::tempdir().unwrap();
            let (_, exe) = install(dir.path(), manifest, b"\x7fELF");
            assert_eq!(installed_version(&exe), None, "{manifest}");
        }
    }

    #[test]
    fn an_unknown_version_has_no_built_in_capabilities() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = MANIFEST.replace("2.1.332", "2.1.400");
        let (_, exe) = install(dir.path(), &manifest, b"\x7fELF");
        assert_eq!(installed_version(&exe).as_deref(), Some("2.1.400"));
        assert_eq!(detect(&exe), None);
    }
}
