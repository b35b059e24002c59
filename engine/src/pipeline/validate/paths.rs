//! Checks of the paths a pipeline names: prompts, schemas, documents.

use std::collections::BTreeMap;

use super::*;

impl Checker<'_> {
    pub(super) fn prompt(&mut self, s: &StageDef, path: &str) {
        let Some(prompt) = &s.prompt else { return };
        let p = child_key(path, "prompt");
        if prompt.trim().is_empty() {
            let at = self.at_value(&p);
            self.error(
                "empty-prompt",
                &p,
                at,
                format!("stage `{}` has an empty prompt", s.id),
            );
            return;
        }
        if prompt.contains('\n') {
            return; // inline template text
        }
        if let Err(why) =
            crate::pipeline::inside::check_inside(self.root, &self.p.dir().join(prompt))
        {
            let at = self.at_value(&p);
            self.error(
                "prompt-outside-repo",
                &p,
                at,
                format!("prompt file `{prompt}` of stage `{}` {why}", s.id),
            )
            .help = Some("prompts are sent to the model: keep them inside the repository".into());
            return;
        }
        if !self.p.dir().join(prompt).is_file() {
            let at = self.at_value(&p);
            self.error(
                "missing-prompt",
                &p,
                at,
                format!("prompt file `{prompt}` of stage `{}` not found", s.id),
            )
            .help = Some("prompt files are relative to the pipeline file's folder; for inline text write `prompt: |` and the text on the next lines".into());
        }
    }

    pub(super) fn output(&mut self, s: &StageDef, path: &str) {
        let Some(out) = &s.output else { return };
        let out_path = child_key(path, "output");
        let schema_path = child_key(&out_path, "schema");
        if let Some(name) = out.schema.strip_prefix("builtin:") {
            if !BUILTIN_SCHEMAS.contains(&name) {
                let at = self.at_value(&schema_path);
                let help = match did_you_mean(name, BUILTIN_SCHEMAS.iter().copied()) {
                    Some(m) => format!("did you mean `builtin:{m}`?"),
                    None => format!(
                        "the built-in schemas are {}",
                        BUILTIN_SCHEMAS
                            .iter()
                            .map(|b| format!("builtin:{b}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                self.error(
                    "unknown-builtin-schema",
                    &schema_path,
                    at,
                    format!("unknown built-in schema `{}`", out.schema),
                )
                .help = Some(help);
            }
        } else {
            self.schema_file(&out.schema, &schema_path);
        }
        if let Some(doc) = &out.document {
            let doc_path = child_key(&out_path, "document");
            if s.kind != StageKind::Generate {
                let at = self.at_key(&doc_path);
                self.error(
                    "field-not-for-kind",
                    &doc_path,
                    at,
                    format!("`output.document` is only for generate stages (stage `{}` is {})", s.id, s.kind.as_str()),
                )
                .help = Some("execute stages change files themselves; only generate stages have a document written for them".into());
            }
            self.document_path(doc, &doc_path);
        }
    }

    pub(super) fn schema_file(&mut self, schema: &str, path: &str) {
        let file = self.p.dir().join(schema);
        let at = self.at_value(path);
        if let Err(why) = crate::pipeline::inside::check_inside(self.root, &file) {
            self.error(
                "schema-outside-repo",
                path,
                at,
                format!("schema file `{schema}` {why}"),
            )
            .help = Some("keep schema files inside the repository".into());
            return;
        }
        let Ok(text) = std::fs::read_to_string(&file) else {
            self.error(
                "missing-schema",
                path,
                at,
                format!("schema file `{schema}` not found"),
            )
            .help = Some(format!(
                "schema files are relative to the pipeline file's folder; built-in schemas are {}",
                BUILTIN_SCHEMAS
                    .iter()
                    .map(|b| format!("builtin:{b}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            return;
        };
        match serde_json::from_str::<serde_json::Value>(&text) {
            Err(e) => {
                self.error(
                    "invalid-schema",
                    path,
                    at,
                    format!("schema file `{schema}` is not valid JSON: {e}"),
                );
            }
            Ok(v) => {
                // Compiled into the process-wide cache: the run that follows
                // validation uses this very validator.
                if let Err(e) = crate::compiled_schema::validator(&v) {
                    self.error(
                        "invalid-schema",
                        path,
                        at,
                        format!("schema file `{schema}` is not a valid JSON Schema: {e}"),
                    );
                }
            }
        }
    }

    pub(super) fn document_path(&mut self, doc: &str, path: &str) {
        let at = self.at_value(path);
        if let Some(why) = escapes(doc) {
            self.error(
                "document-outside-repo",
                path,
                at,
                format!("document path `{doc}` {why}; documents are written inside the repository"),
            )
            .help = Some(
                "give a path relative to the repository root, e.g. `docs/specs/requirements.md`"
                    .into(),
            );
            return;
        }
        let norm = normalize(doc);
        let protected = ALWAYS_PROTECTED
            .iter()
            .map(std::string::ToString::to_string)
            .chain(self.p.file.protected_paths.iter().map(|p| normalize(p)))
            .find(|p| !p.is_empty() && (norm == *p || norm.starts_with(&format!("{p}/"))));
        if let Some(p) = protected {
            self.error(
                "document-protected",
                path,
                at,
                format!("document path `{doc}` is inside `{p}`, which is protected"),
            );
            return;
        }
        if let Some(rel) = self.pipeline_rel() {
            if rel == norm {
                self.error(
                    "document-protected",
                    path,
                    at,
                    format!("document path `{doc}` is the pipeline file itself"),
                );
                return;
            }
        }
        if let Some(link) = symlink_out(self.root, &norm) {
            self.error(
                "document-outside-repo",
                path,
                at,
                format!("document path `{doc}` goes through `{link}`, a symbolic link out of the repository"),
            );
        }
    }

    /// The pipeline file relative to the repository root, normalized.
    pub(super) fn pipeline_rel(&self) -> Option<String> {
        let file = std::fs::canonicalize(&self.p.path).ok()?;
        let root = std::fs::canonicalize(self.root).ok()?;
        Some(normalize(&file.strip_prefix(root).ok()?.to_string_lossy()))
    }

    pub(super) fn shared_documents(&mut self) {
        let mut writers: BTreeMap<String, usize> = BTreeMap::new();
        for (i, s) in self.p.file.stages.iter().enumerate() {
            let Some(doc) = s.output.as_ref().and_then(|o| o.document.as_ref()) else {
                continue;
            };
            let key = normalize(doc);
            match writers.get(&key) {
                Some(&j) => {
                    let other = &self.p.file.stages[j].id;
                    let p = child_key(&child_key(&child_index("stages", i), "output"), "document");
                    let at = self.at_value(&p);
                    self.error(
                        "duplicate-document",
                        &p,
                        at,
                        format!(
                            "stages `{other}` and `{}` both write the document `{doc}`",
                            s.id
                        ),
                    )
                    .help = Some("each document is written by exactly one stage".into());
                }
                None => {
                    writers.insert(key, i);
                }
            }
        }
    }
}

/// Why a relative path would leave its folder, if it would.
pub(super) fn escapes(p: &str) -> Option<&'static str> {
    let path = Path::new(p);
    if path.is_absolute() || p.starts_with('/') || p.starts_with('\\') {
        return Some("is absolute");
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Some("contains `..`");
    }
    if p.trim().is_empty() {
        return Some("is empty");
    }
    None
}

/// A relative path with `.` parts and repeated or trailing slashes removed.
pub(super) fn normalize(p: &str) -> String {
    Path::new(p)
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The first existing part of `rel` under `root` that is a symbolic link leading
/// out of the repository.
pub(super) fn symlink_out(root: &Path, rel: &str) -> Option<String> {
    let canon_root = std::fs::canonicalize(root).ok()?;
    let mut cur = PathBuf::from(root);
    let mut shown = Vec::new();
    for part in rel.split('/') {
        cur.push(part);
        shown.push(part);
        let meta = std::fs::symlink_metadata(&cur).ok()?;
        if meta.file_type().is_symlink() {
            let target = std::fs::canonicalize(&cur).ok();
            if !target.is_some_and(|t| t.starts_with(&canon_root)) {
                return Some(shown.join("/"));
            }
        }
    }
    None
}
