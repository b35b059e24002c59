//! What one invocation does: from `FAKE_CLAUDE_SCRIPT` (a JSON list consumed one item
//! per print-mode invocation) or from `FAKE_CLAUDE_SCENARIO`/`FAKE_CLAUDE_OUTPUT`.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use serde::Deserialize;
use serde_json::Value;

use super::scenario::Scenario;

/// The behaviour chosen for one print-mode invocation.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub scenario: Scenario,
    /// The structured output to return (instead of one synthesised from the schema).
    pub output: Option<Value>,
    /// The `result` text (instead of the default for the scenario).
    pub result: Option<String>,
    pub cost_usd: Option<f64>,
    /// What `write-file` and `git-commit` write, as `path[=content]` (instead of
    /// `FAKE_CLAUDE_WRITE`), so each invocation of a script can edit its own file.
    pub write: Option<String>,
}

/// One item of a script: a scenario name, or an object.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ScriptItem {
    Name(String),
    Step(ScriptStep),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptStep {
    scenario: Option<String>,
    output: Option<Value>,
    result: Option<String>,
    cost: Option<f64>,
    write: Option<String>,
    /// Taken only by an invocation whose prompt contains this text, so that stages
    /// running concurrently get their own items whatever order they start in.
    #[serde(rename = "match")]
    matches: Option<String>,
}

/// Reads the environment (and the script, if any) and picks this invocation's step.
pub fn next_step(
    env: &dyn Fn(&str) -> Option<String>,
    prompt: &str,
    log: Option<&Path>,
) -> Result<Step, String> {
    let from_env = step_from_env(env)?;
    let Some(script) = env("FAKE_CLAUDE_SCRIPT") else {
        return Ok(from_env);
    };
    let script = PathBuf::from(script);
    let text = std::fs::read_to_string(&script)
        .map_err(|e| format!("failed to read script {}: {e}", script.display()))?;
    let items: Vec<ScriptItem> = serde_json::from_str(&text)
        .map_err(|e| format!("failed to parse script {}: {e}", script.display()))?;
    let state = state_path(&script, log);
    let index = claim(&state, &items, prompt)?;
    let (scenario, output, result, cost, write) = match &items[index] {
        ScriptItem::Name(name) => (Some(name.clone()), None, None, None, None),
        ScriptItem::Step(step) => (
            step.scenario.clone(),
            step.output.clone(),
            step.result.clone(),
            step.cost,
            step.write.clone(),
        ),
    };
    Ok(Step {
        scenario: match scenario {
            Some(name) => name.parse()?,
            None => Scenario::Success,
        },
        output: output.or(from_env.output),
        result: result.or(from_env.result),
        cost_usd: cost.or(from_env.cost_usd),
        write: write.or(from_env.write),
    })
}

fn step_from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Step, String> {
    let scenario = match env("FAKE_CLAUDE_SCENARIO") {
        Some(name) if !name.is_empty() => name.parse()?,
        _ => Scenario::Success,
    };
    let output = match env("FAKE_CLAUDE_OUTPUT") {
        Some(spec) => Some(read_json_spec(&spec)?),
        None => None,
    };
    let cost_usd = match env("FAKE_CLAUDE_COST") {
        Some(cost) => Some(
            cost.parse()
                .map_err(|_| format!("FAKE_CLAUDE_COST is not a number: {cost}"))?,
        ),
        None => None,
    };
    Ok(Step {
        scenario,
        output,
        result: env("FAKE_CLAUDE_RESULT"),
        cost_usd,
        write: env("FAKE_CLAUDE_WRITE"),
    })
}

/// `FAKE_CLAUDE_OUTPUT`: inline JSON, or `@path` to a JSON file.
fn read_json_spec(spec: &str) -> Result<Value, String> {
    let text = match spec.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("failed to read FAKE_CLAUDE_OUTPUT file {path}: {e}"))?,
        None => spec.to_owned(),
    };
    serde_json::from_str(&text).map_err(|e| format!("FAKE_CLAUDE_OUTPUT is not JSON: {e}"))
}

/// The consumed-items file lives beside the log (or the script when there is no log).
fn state_path(script: &Path, log: Option<&Path>) -> PathBuf {
    let base = log.unwrap_or(script);
    let mut name = base.file_name().unwrap_or_default().to_os_string();
    name.push(".script-state");
    base.with_file_name(name)
}

/// Marks the first unconsumed item this prompt may take as consumed, under a lock so
/// that concurrent invocations never take the same item.
fn claim(state: &Path, items: &[ScriptItem], prompt: &str) -> Result<usize, String> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(state)
        .map_err(|e| format!("failed to open {}: {e}", state.display()))?;
    let mut file: Flock<File> = Flock::lock(file, FlockArg::LockExclusive)
        .map_err(|(_, e)| format!("failed to lock {}: {e}", state.display()))?;
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|e| format!("failed to read {}: {e}", state.display()))?;
    let mut consumed: Vec<usize> = if text.trim().is_empty() {
        Vec::new()
    } else {
        serde_json::from_str(&text).map_err(|e| format!("corrupt {}: {e}", state.display()))?
    };
    let index = items
        .iter()
        .enumerate()
        .find(|(i, item)| {
            !consumed.contains(i)
                && match item {
                    ScriptItem::Step(ScriptStep {
                        matches: Some(needle),
                        ..
                    }) => prompt.contains(needle.as_str()),
                    _ => true,
                }
        })
        .map(|(i, _)| i)
        .ok_or_else(|| {
            format!(
                "script exhausted: {} of {} items used, none left for this prompt",
                consumed.len(),
                items.len()
            )
        })?;
    consumed.push(index);
    let text = serde_json::to_string(&consumed).expect("indices serialise");
    file.set_len(0)
        .and_then(|_| file.seek(SeekFrom::Start(0)))
        .and_then(|_| file.write_all(text.as_bytes()))
        .map_err(|e| format!("failed to write {}: {e}", state.display()))?;
    Ok(index)
}
