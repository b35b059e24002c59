//! Prompt templates (docs/stage-kinds.md): minijinja with strict undefined variables.
//!
//! The context holds `pipeline`, `stage`, `item` (fan-out instances) and `stages`,
//! which has an entry only for the stages this one needs, directly or through
//! others; a template cannot see what it does not depend on, so an input hash over
//! its needs covers everything it can read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;
use serde_json::Value;

/// Where a prompt template comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptSource {
    /// A file, relative to the pipeline file's folder.
    File(PathBuf),
    /// Inline text (`prompt: |`).
    Inline(String),
}

impl PromptSource {
    /// A prompt value with a newline is inline text, anything else a file path.
    pub fn from_value(value: &str, pipeline_dir: &Path) -> Self {
        if value.contains('\n') {
            PromptSource::Inline(value.to_string())
        } else {
            PromptSource::File(pipeline_dir.join(value))
        }
    }
}

/// Why a prompt could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("failed to read prompt file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to render prompt {name}{line}: {message}")]
    Render {
        name: String,
        line: String,
        message: String,
    },
}

/// What an upstream stage offers to templates.
#[derive(Debug, Clone, Default, Serialize)]
pub struct UpstreamView {
    /// The validated output JSON.
    pub output: Value,
    /// The text of the document it wrote, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document: Option<String>,
}

/// The template context.
#[derive(Debug, Clone, Serialize)]
pub struct PromptContext {
    pub pipeline: Value,
    pub stage: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<Value>,
    pub stages: BTreeMap<String, UpstreamView>,
    /// `attempt.previous`: what went wrong in the attempt before this one (null on
    /// a first attempt). Never part of the input hash: the hash is taken over the
    /// prompt rendered with it null.
    pub attempt: AttemptView,
}

/// The `attempt` template variable.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AttemptView {
    pub previous: Option<crate::previous::PreviousAttempt>,
}

/// Read (if a file) and render a prompt. The result is sent byte for byte.
pub fn render(
    source: &PromptSource,
    name: &str,
    ctx: &PromptContext,
) -> Result<String, PromptError> {
    let (template, name) = read(source, name)?;
    render_text(&template, &name, ctx)
}

fn read(source: &PromptSource, name: &str) -> Result<(String, String), PromptError> {
    Ok(match source {
        PromptSource::File(p) => (
            std::fs::read_to_string(p).map_err(|e| PromptError::Read {
                path: p.clone(),
                source: e,
            })?,
            p.display().to_string(),
        ),
        PromptSource::Inline(t) => (t.clone(), name.to_string()),
    })
}

/// Render template text.
pub(crate) fn render_text(
    template: &str,
    name: &str,
    ctx: &PromptContext,
) -> Result<String, PromptError> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    // Prompts are markdown, not HTML.
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.set_keep_trailing_newline(true);
    let err = |e: minijinja::Error| PromptError::Render {
        name: name.to_string(),
        line: e.line().map(|l| format!(":{l}")).unwrap_or_default(),
        message: describe(&e),
    };
    env.add_template_owned(name.to_string(), template.to_string())
        .map_err(err)?;
    let tmpl = env.get_template(name).map_err(err)?;
    tmpl.render(ctx).map_err(err)
}

fn describe(e: &minijinja::Error) -> String {
    let mut msg = match e.kind() {
        minijinja::ErrorKind::UndefinedError => "undefined variable or attribute".to_string(),
        _ => e.kind().to_string(),
    };
    if let Some(d) = e.detail() {
        msg.push_str(": ");
        msg.push_str(d);
    }
    if e.kind() == minijinja::ErrorKind::UndefinedError {
        msg.push_str(" (only `pipeline`, `stage`, `item`, `attempt` and `stages.<id>` of stages this one needs are defined)");
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> PromptContext {
        let mut stages = BTreeMap::new();
        stages.insert(
            "design".to_string(),
            UpstreamView {
                output: json!({"summary": "a queue"}),
                document: Some("# Design\n".into()),
            },
        );
        PromptContext {
            pipeline: json!({"name": "demo"}),
            stage: json!({"id": "tasks"}),
            item: None,
            stages,
            attempt: AttemptView::default(),
        }
    }

    #[test]
    fn renders_upstream_outputs_and_documents_verbatim() {
        let out = render_text(
            "P={{ pipeline.name }} S={{ stages.design.output.summary }}\n{{ stages.design.document }}<b>\n",
            "t",
            &ctx(),
        )
        .unwrap();
        assert_eq!(out, "P=demo S=a queue\n# Design\n<b>\n");
    }

    #[test]
    fn undefined_variables_fail_with_their_line() {
        let e = render_text(
            "line one\n{{ stages.requirements.output }}\n",
            "prompts/x.md",
            &ctx(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("prompts/x.md:2"), "{e}");
        assert!(e.contains("undefined"), "{e}");
    }

    #[test]
    fn inline_prompts_are_told_apart_from_paths() {
        let d = Path::new("/repo");
        assert_eq!(
            PromptSource::from_value("prompts/a.md", d),
            PromptSource::File(PathBuf::from("/repo/prompts/a.md"))
        );
        assert!(matches!(
            PromptSource::from_value("Do this\nthen that", d),
            PromptSource::Inline(_)
        ));
    }
}
