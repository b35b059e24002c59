//! Semantic checks of a loaded pipeline (docs/pipeline-format.md, docs/claude-code-runner.md): everything the schema
//! cannot say. Every problem is reported, each with its location.

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

use crate::dag::StageGraph;
use crate::diagnostic::{Diagnostic, Location, Severity};
use crate::pipeline::forbidden;
use crate::pipeline::load::{self, LoadedPipeline};
use crate::pipeline::locate::{child_index, child_key};
use crate::pipeline::model::{
    Argv, CommandSandbox, RunnerSettings, StageDef, StageKind, VerificationCommand,
};
use crate::pipeline::suggest::did_you_mean;
use crate::safety;

mod gate;
mod paths;
mod policy;
mod runner;

use paths::escapes;

/// The built-in output schemas, addressed as `builtin:NAME`.
pub(crate) const BUILTIN_SCHEMAS: &[&str] = &["document", "tasks", "task-result"];

/// Paths no document may be written into, whatever `protectedPaths` says.
pub(crate) const ALWAYS_PROTECTED: &[&str] = &[".git", ".specbridge", ".claude"];

/// A pipeline with no errors (warnings may remain).
#[derive(Debug, Clone)]
pub struct ValidPipeline {
    pub pipeline: LoadedPipeline,
    pub warnings: Vec<Diagnostic>,
    pub graph: StageGraph,
}

/// Load `path` and check it against the repository at `repo_root`: every problem,
/// sorted by location, or the pipeline with its warnings.
pub fn load_and_validate(path: &Path, repo_root: &Path) -> Result<ValidPipeline, Vec<Diagnostic>> {
    load_and_validate_checked(path, repo_root, None)
}

/// [`load_and_validate`], with the structural check left out for bytes that
/// `checked` vouches for ([`load::CheckedBefore`]); the semantic checks all run.
pub fn load_and_validate_checked(
    path: &Path,
    repo_root: &Path,
    checked: Option<&load::CheckedBefore>,
) -> Result<ValidPipeline, Vec<Diagnostic>> {
    let pipeline = load::load_checked(path, checked)?;
    // The graph the checks built is the one handed on: built once per load.
    let (diagnostics, graph) = check(&pipeline, repo_root);
    if diagnostics.iter().any(Diagnostic::is_error) {
        return Err(diagnostics);
    }
    Ok(ValidPipeline {
        pipeline,
        warnings: diagnostics,
        graph,
    })
}

/// The graph of a pipeline's stages (self-dependencies left out).
pub(crate) fn stage_graph(stages: &[StageDef]) -> StageGraph {
    StageGraph::from_needs(stages.iter().map(|s| {
        (
            s.id.as_str(),
            s.needs
                .iter()
                .map(String::as_str)
                .filter(move |n| *n != s.id),
        )
    }))
}

/// Every semantic problem of a loaded pipeline, sorted by location.
pub fn validate(pipeline: &LoadedPipeline, repo_root: &Path) -> Vec<Diagnostic> {
    check(pipeline, repo_root).0
}

/// Every semantic problem, sorted by location, and the stage graph the checks
/// built.
fn check(pipeline: &LoadedPipeline, repo_root: &Path) -> (Vec<Diagnostic>, StageGraph) {
    let mut c = Checker {
        p: pipeline,
        root: repo_root,
        out: Vec::new(),
    };
    // The safety scan reads the document alone: on a second core beside the
    // semantic checks, which read the typed file (a 10,000-stage pipeline's
    // checks take about as long as its scan).
    let (scan, graph) = crate::beside::beside(
        || forbidden::scan(&pipeline.document, &pipeline.index, &pipeline.path),
        || {
            c.top_level();
            let graph = c.stages();
            c.gate();
            graph
        },
    );
    c.out.extend(scan);
    // After the scan: a value it already refused is not reported twice.
    c.policy();
    load::sort(&mut c.out);
    (c.out, graph)
}

struct Checker<'a> {
    p: &'a LoadedPipeline,
    root: &'a Path,
    out: Vec<Diagnostic>,
}

use crate::store::MAX_ID_BYTES;

fn valid_id(id: &str) -> bool {
    let mut chars = id.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

impl Checker<'_> {
    fn at_key(&self, path: &str) -> Option<Location> {
        self.p.locate(path)
    }

    fn at_value(&self, path: &str) -> Option<Location> {
        self.p.index.value(path).or_else(|| self.p.locate(path))
    }

    fn error(
        &mut self,
        code: &str,
        path: &str,
        at: Option<Location>,
        message: String,
    ) -> &mut Diagnostic {
        self.out.push(
            Diagnostic::error(code, &self.p.path, message)
                .at(at)
                .with_path(path),
        );
        self.out.last_mut().expect("just pushed")
    }

    fn warning(&mut self, code: &str, path: &str, message: String) -> &mut Diagnostic {
        let at = self.at_key(path);
        self.out.push(
            Diagnostic::warning(code, &self.p.path, message)
                .at(at)
                .with_path(path),
        );
        self.out.last_mut().expect("just pushed")
    }

    fn top_level(&mut self) {
        let f = &self.p.file;
        if f.stages.is_empty() {
            let at = self.at_key("stages");
            self.error(
                "no-stages",
                "stages",
                at,
                "the pipeline has no stages".into(),
            );
        }
        if f.concurrency == Some(0) {
            let at = self.at_value("concurrency");
            self.error(
                "invalid-value",
                "concurrency",
                at,
                "`concurrency` must be at least 1".into(),
            );
        }
        if let Some(b) = f.budget.max_budget_usd {
            self.positive_money(b, "budget.maxBudgetUsd");
        }
        for (i, p) in f.protected_paths.iter().enumerate() {
            let path = child_index("protectedPaths", i);
            if let Some(why) = escapes(p) {
                let at = self.at_value(&path);
                self.error(
                    "path-outside-repo",
                    &path,
                    at,
                    format!("protected path `{p}` {why}; protected paths are relative to the repository root"),
                );
            }
        }
        for (i, name) in f.secrets.iter().enumerate() {
            let valid = name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                let path = child_index("secrets", i);
                let at = self.at_value(&path);
                self.error(
                    "invalid-value",
                    &path,
                    at,
                    format!("`{name}` is not an environment variable name; `secrets` lists names whose values are redacted, never the values themselves"),
                );
            }
        }
        self.runner(&f.runner, "runner", None);
        self.verification(&f.verification, "verification");
    }

    fn positive_money(&mut self, value: f64, path: &str) {
        if value <= 0.0 || !value.is_finite() {
            let at = self.at_value(path);
            self.error(
                "invalid-value",
                path,
                at,
                format!("`{path}` must be greater than zero, found {value}"),
            );
        }
    }

    fn stages(&mut self) -> StageGraph {
        let stages = &self.p.file.stages;
        // Hashed, not ordered: ids are compared only when a diagnostic lists them.
        let mut first: HashMap<&str, usize> = HashMap::with_capacity(stages.len());
        for (i, s) in stages.iter().enumerate() {
            let path = child_index("stages", i);
            let id_path = child_key(&path, "id");
            if !valid_id(&s.id) {
                let at = self.at_value(&id_path);
                self.error(
                    "invalid-id",
                    &id_path,
                    at,
                    format!("stage id `{}` is not allowed: ids use lowercase letters, digits, `-` and `_`, and start with a letter or digit", s.id),
                );
            } else if s.id.len() > MAX_ID_BYTES {
                let at = self.at_value(&id_path);
                self.error(
                    "id-too-long",
                    &id_path,
                    at,
                    format!(
                        "stage id `{}…` is {} bytes long; ids may be at most {MAX_ID_BYTES} bytes",
                        &s.id[..24],
                        s.id.len()
                    ),
                )
                .help = Some("each stage id names a folder of the run; keep it short".into());
            }
            match first.get(s.id.as_str()) {
                Some(&j) => {
                    let line = self
                        .at_value(&child_key(&child_index("stages", j), "id"))
                        .map(|l| format!(" (line {})", l.line))
                        .unwrap_or_default();
                    let at = self.at_value(&id_path);
                    self.error(
                        "duplicate-id",
                        &id_path,
                        at,
                        format!("duplicate stage id `{}`", s.id),
                    )
                    .help = Some(format!(
                        "the first stage with this id is stages[{j}]{line}; ids must be unique"
                    ));
                }
                None => {
                    first.insert(&s.id, i);
                }
            }
        }
        let ids = StageIds::new(first);
        let graph = stage_graph(stages);
        for (i, s) in stages.iter().enumerate() {
            let path = child_index("stages", i);
            self.needs(s, &path, &ids);
            self.kind_fields(s, &path);
            self.prompt(s, &path);
            self.output(s, &path);
            self.for_each(s, &path, &graph);
            if let Some(r) = &s.runner {
                self.runner(r, &child_key(&path, "runner"), Some(s));
            }
            if let Some(v) = &s.verification {
                self.verification(v, &child_key(&path, "verification"));
            }
            if let Some(t) = s.timeout {
                self.nonzero_duration(t.as_millis(), &child_key(&path, "timeout"));
            }
            if let (Some(sb), StageKind::Check) = (&s.sandbox, s.kind) {
                self.command_sandbox(sb, &child_key(&path, "sandbox"));
            }
        }
        self.cycles(&graph);
        self.shared_documents();
        graph
    }

    /// A need is looked up by hash, not by a scan per need.
    fn needs(&mut self, s: &StageDef, path: &str, ids: &StageIds<'_>) {
        let mut seen = BTreeSet::new();
        for (j, need) in s.needs.iter().enumerate() {
            if *need != s.id && ids.contains(need) && seen.insert(need.as_str()) {
                // The common case: no path, no position to build.
                continue;
            }
            let need_path = child_index(&child_key(path, "needs"), j);
            let at = self.at_value(&need_path);
            if *need == s.id {
                self.error(
                    "self-dependency",
                    &need_path,
                    at,
                    format!("stage `{}` needs itself", s.id),
                )
                .help = Some("remove it from its own `needs`".into());
            } else if !ids.contains(need) {
                let ids = ids.sorted();
                let help = match did_you_mean(need, ids.iter().copied().filter(|i| *i != s.id)) {
                    Some(m) => format!("did you mean `{m}`?"),
                    None => format!("the stages are: {}", ids.join(", ")),
                };
                self.error(
                    "unknown-need",
                    &need_path,
                    at,
                    format!(
                        "stage `{}` needs `{need}`, which is not a stage of this pipeline",
                        s.id
                    ),
                )
                .help = Some(help);
            } else {
                self.warning(
                    "duplicate-need",
                    &need_path,
                    format!("stage `{}` lists `{need}` in `needs` twice", s.id),
                );
            }
        }
    }

    /// Keys that belong to other kinds, and keys a kind requires.
    fn kind_fields(&mut self, s: &StageDef, path: &str) {
        let kind = s.kind.as_str();
        let present: [(&str, bool); 7] = [
            ("prompt", s.prompt.is_some()),
            ("output", s.output.is_some()),
            ("forEach", s.for_each.is_some()),
            ("runner", s.runner.is_some()),
            ("argv", s.argv.is_some()),
            ("verification", s.verification.is_some()),
            ("sandbox", s.sandbox.is_some()),
        ];
        let allowed: &[&str] = match s.kind {
            StageKind::Generate => &["prompt", "output", "forEach", "runner"],
            StageKind::Execute => &["prompt", "output", "forEach", "runner", "verification"],
            StageKind::Check => &["argv", "sandbox"],
        };
        for (key, is_set) in present {
            if is_set && !allowed.contains(&key) {
                let p = child_key(path, key);
                let at = self.at_key(&p);
                let msg = format!("`{key}` is not used by {kind} stages (stage `{}`)", s.id);
                let help = match (s.kind, key) {
                    (StageKind::Check, _) => "check stages run `argv` and nothing else".to_string(),
                    (_, "sandbox") => "`sandbox` confines check stages and verification commands; an agent's own sandbox is `runner.sandbox`".to_string(),
                    (StageKind::Generate, "verification") => {
                        "verification runs after execute stages only".to_string()
                    }
                    (_, "argv") => {
                        "use a separate `kind: check` stage to run a command".to_string()
                    }
                    _ => format!("remove `{key}` or change the stage's kind"),
                };
                self.error("field-not-for-kind", &p, at, msg).help = Some(help);
            }
        }
        if s.timeout.is_some() && s.kind.is_agent() {
            let p = child_key(path, "timeout");
            let at = self.at_key(&p);
            self.error(
                "field-not-for-kind",
                &p,
                at,
                format!("`timeout` is not used by {kind} stages (stage `{}`)", s.id),
            )
            .help = Some("an agent stage's timeout is `runner.timeout`".into());
        }
        let stage_at = |c: &Self| c.at_key(&child_key(path, "id"));
        if s.kind.is_agent() && s.prompt.is_none() {
            let stage_at = stage_at(self);
            self.error(
                "missing-prompt-key",
                &child_key(path, "prompt"),
                stage_at,
                format!("{kind} stage `{}` has no `prompt`", s.id),
            )
            .help =
                Some("give a file (`prompt: prompts/x.md`) or inline text (`prompt: |`)".into());
        }
        if s.kind == StageKind::Generate && s.output.is_none() {
            let stage_at = stage_at(self);
            self.error(
                "missing-output",
                &child_key(path, "output"),
                stage_at,
                format!("generate stage `{}` has no `output`", s.id),
            )
            .help = Some("add `output: { schema: builtin:document }` (or a schema file)".into());
        }
        if s.kind == StageKind::Check {
            match &s.argv {
                None => {
                    let stage_at = stage_at(self);
                    self.error(
                        "missing-argv",
                        &child_key(path, "argv"),
                        stage_at,
                        format!("check stage `{}` has no `argv`", s.id),
                    )
                    .help = Some("add the command as a list, e.g. `argv: [cargo, test]`".into());
                }
                Some(argv) => self.argv(argv, &child_key(path, "argv")),
            }
        }
    }

    fn for_each(&mut self, s: &StageDef, path: &str, graph: &StageGraph) {
        let Some(fe) = &s.for_each else { return };
        let fe_path = child_key(path, "forEach");
        let stage_path = child_key(&fe_path, "stage");
        let at = self.at_value(&stage_path);
        let stages = &self.p.file.stages;
        match stages.iter().find(|t| t.id == fe.stage) {
            None => {
                let ids = stages.iter().map(|t| t.id.as_str()).filter(|i| *i != s.id);
                let d = self.error(
                    "foreach-unknown-stage",
                    &stage_path,
                    at,
                    format!(
                        "`forEach.stage` of `{}` names `{}`, which is not a stage of this pipeline",
                        s.id, fe.stage
                    ),
                );
                if let Some(m) = did_you_mean(&fe.stage, ids) {
                    d.help = Some(format!("did you mean `{m}`?"));
                }
            }
            Some(t) if t.kind != StageKind::Generate => {
                self.error(
                    "foreach-not-generate",
                    &stage_path,
                    at,
                    format!(
                        "`forEach.stage` of `{}` is `{}`, a {} stage; it must be a generate stage",
                        s.id,
                        t.id,
                        t.kind.as_str()
                    ),
                );
            }
            Some(t) => {
                let upstream = t.id != s.id && graph.ancestors([s.id.as_str()]).contains(&t.id);
                if !upstream {
                    self.error(
                        "foreach-not-upstream",
                        &stage_path,
                        at,
                        format!(
                            "`forEach.stage` of `{}` is `{}`, which is not upstream of it",
                            s.id, t.id
                        ),
                    )
                    .help = Some(format!("add `{}` to the `needs` of `{}`", t.id, s.id));
                }
            }
        }
        if !(fe.items.is_empty() || fe.items.starts_with('/')) {
            let p = child_key(&fe_path, "items");
            let at = self.at_value(&p);
            self.error(
                "invalid-pointer",
                &p,
                at,
                format!(
                    "`forEach.items` must be a JSON pointer such as `/tasks`, found `{}`",
                    fe.items
                ),
            );
        }
    }

    fn cycles(&mut self, graph: &StageGraph) {
        for cycle in graph.find_cycles() {
            let path = &cycle.0;
            if path.len() <= 2 {
                continue; // a self-dependency, reported by `needs`
            }
            // Point at the first stage's `needs` entry that starts the cycle.
            let stages = &self.p.file.stages;
            let (i, s) = stages
                .iter()
                .enumerate()
                .find(|(_, s)| s.id == path[0])
                .expect("cycle members are stages");
            let j = s.needs.iter().position(|n| *n == path[1]).unwrap_or(0);
            let p = child_index(&child_key(&child_index("stages", i), "needs"), j);
            let at = self.at_value(&p);
            self.error("cycle", &p, at, format!("dependency cycle: {cycle}"))
                .help =
                Some("each stage needs the next; remove one of these `needs` entries".into());
        }
    }
}

/// The stage ids of a pipeline (the first stage of each), found by hash; sorted
/// only when a diagnostic lists them.
struct StageIds<'a> {
    first: HashMap<&'a str, usize>,
    sorted: std::cell::OnceCell<Vec<&'a str>>,
}

impl<'a> StageIds<'a> {
    fn new(first: HashMap<&'a str, usize>) -> Self {
        StageIds {
            first,
            sorted: std::cell::OnceCell::new(),
        }
    }

    fn contains(&self, id: &str) -> bool {
        self.first.contains_key(id)
    }

    fn sorted(&self) -> &[&'a str] {
        self.sorted.get_or_init(|| {
            let mut ids: Vec<&str> = self.first.keys().copied().collect();
            ids.sort_unstable();
            ids
        })
    }
}

/// The exit-code class of a set of diagnostics: None when there is no error.
pub fn worst_class(diags: &[Diagnostic]) -> Option<crate::diagnostic::DiagnosticClass> {
    use crate::diagnostic::DiagnosticClass;
    let errors: Vec<_> = diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    if errors.is_empty() {
        None
    } else if errors.iter().any(|d| d.class == DiagnosticClass::Safety) {
        Some(DiagnosticClass::Safety)
    } else {
        Some(DiagnosticClass::Config)
    }
}

#[cfg(test)]
mod tests {
    use super::paths::normalize;
    use super::runner::suggest_list;
    use super::*;

    #[test]
    fn ids() {
        for ok in ["a", "0", "design", "impl-2", "a_b"] {
            assert!(valid_id(ok), "{ok}");
        }
        for bad in ["", "A", "-a", "_a", "a b", "a.b", "é"] {
            assert!(!valid_id(bad), "{bad}");
        }
    }

    #[test]
    fn paths() {
        assert_eq!(escapes("/etc/passwd"), Some("is absolute"));
        assert_eq!(escapes("docs/../../x"), Some("contains `..`"));
        assert_eq!(escapes("docs/x.md"), None);
        assert_eq!(normalize("./docs//x.md/"), "docs/x.md");
    }

    #[test]
    fn shell_lines_become_lists() {
        assert_eq!(suggest_list("cargo test --all"), "cargo, test, --all");
        assert_eq!(suggest_list("echo a:b"), "echo, \"a:b\"");
    }
}
