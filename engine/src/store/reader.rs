//! Reading a run folder back: the one reader of the layout in [`layout`], used by
//! `runs`, upstream resolution, resume, audit and replay.
//!
//! Everything is read on demand: opening a reader touches nothing, listing stages
//! reads only their `stage.json`, and an attempt's files are opened only when
//! asked for, so a listing of a large run never loads the attempts' logs. A run
//! folder deleted while it is read gives [`StoreError::RunGone`], never a panic.

use std::collections::{BTreeMap, HashMap};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::beside::in_two_halves;
use crate::store::layout::{self, attempt_number};
use crate::store::records::{PlanRecord, RunRecord, StageRecord};
use crate::store::select::is_safe_component;
use crate::store::started::started_record;
use crate::store::StoreError;

/// One recorded run, read on demand.
#[derive(Debug, Clone)]
pub struct RunReader {
    id: String,
    dir: PathBuf,
}

impl RunReader {
    /// The run folder at `dir`, wherever it is (a run store, a recording, a copy).
    /// Reads nothing: a missing folder shows on the first read.
    pub fn at(dir: &Path) -> RunReader {
        let id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        RunReader {
            id,
            dir: dir.to_path_buf(),
        }
    }

    pub(crate) fn new(id: String, dir: PathBuf) -> RunReader {
        RunReader { id, dir }
    }

    /// The run id (the folder's name).
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The absolute path of a run-relative path from [`layout`].
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// Whether the folder holds a run record (is a run folder at all).
    pub fn has_run_record(&self) -> bool {
        self.dir.join(layout::RUN).is_file()
    }

    /// `run.json`.
    pub fn run(&self) -> Result<RunRecord, StoreError> {
        self.json(layout::RUN)
    }

    /// `plan.json`; `None` when the run stopped before writing it.
    pub fn plan(&self) -> Result<Option<PlanRecord>, StoreError> {
        self.json_if_any(layout::PLAN)
    }

    /// `events.jsonl`.
    pub fn events_path(&self) -> PathBuf {
        self.dir.join(layout::EVENTS)
    }

    /// The names of the stage folders, sorted. A run that has none yet has none; a
    /// run folder that is gone is an error.
    pub fn stage_ids(&self) -> Result<Vec<String>, StoreError> {
        let stages = self.dir.join(layout::STAGES);
        let mut ids: Vec<String> = self
            .entries(&stages)?
            .into_iter()
            .filter(|(_, is_dir)| *is_dir)
            .map(|(name, _)| name)
            .filter(|n| is_safe_component(n))
            .collect();
        ids.sort();
        Ok(ids)
    }

    /// `stages/<id>/stage.json`; `None` when the stage has no record.
    pub fn stage(&self, id: &str) -> Result<Option<StageRecord>, StoreError> {
        self.json_if_any(&self.stage_rel_checked(id, layout::stage_record_rel)?)
    }

    /// Every stage record, by stage id. A record that cannot be read is an error:
    /// for work that acts on the records (resume). A large run's records are
    /// read in two halves at once ([`in_two_halves`]): reading them is mostly
    /// system calls (an open, a `statx` and a read a record), which two cores
    /// share; `runs show` of 1,000 stages read them one by one in about two
    /// thirds of its time.
    pub fn stage_records(&self) -> Result<BTreeMap<String, StageRecord>, StoreError> {
        let read = |ids: &[String]| -> Result<Vec<StageRecord>, StoreError> {
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                out.extend(self.stage(id)?);
            }
            Ok(out)
        };
        let (first, second) = in_two_halves(&self.stage_ids()?, read);
        Ok(first?
            .into_iter()
            .chain(second?)
            .map(|rec| (rec.stage_id.clone(), rec))
            .collect())
    }

    /// Every readable stage record in plan order, then any others by id: for
    /// display, where a stage without a readable record is left out.
    pub fn stages_in_plan_order(&self) -> Result<Vec<StageRecord>, StoreError> {
        let plan = self.plan().ok().flatten().unwrap_or_default();
        // Plan position by id: a search per comparison is quadratic in the stages.
        let order: HashMap<&str, usize> = plan
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id.as_str(), i))
            .collect();
        let read = |ids: &[String]| -> Vec<StageRecord> {
            ids.iter()
                .filter_map(|id| self.stage_or_started(id, &plan).ok().flatten())
                .collect()
        };
        let (mut stages, second) = in_two_halves(&self.stage_ids()?, read);
        stages.extend(second);
        stages.sort_by_cached_key(|s| {
            (
                order
                    .get(s.stage_id.as_str())
                    .copied()
                    .unwrap_or(usize::MAX),
                s.stage_id.clone(),
            )
        });
        Ok(stages)
    }

    /// The bytes of `stages/<id>/output.json`; `None` when the stage wrote none.
    pub fn output_bytes(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.bytes_if_any(&self.stage_rel_checked(id, layout::output_rel)?)
    }

    /// `stages/<id>/stage.json`, or, for a stage that has none because its
    /// attempt started without writing one (`store/started.rs`), the `running`
    /// record its attempt folders and its node in `plan` tell.
    pub(crate) fn stage_or_started(
        &self,
        id: &str,
        plan: &PlanRecord,
    ) -> Result<Option<StageRecord>, StoreError> {
        if let Some(rec) = self.stage(id)? {
            return Ok(Some(rec));
        }
        // Only a stage without a record gets here: the few that were running.
        let Some(node) = plan.nodes.iter().find(|n| n.id == id) else {
            return Ok(None);
        };
        let last = self.attempt_numbers(id)?.last().copied().unwrap_or(0);
        Ok(started_record(node, last))
    }

    /// The numbers of the stage's `attempt-NNN` folders, ascending. A stage with
    /// no folder has none.
    pub(crate) fn attempt_numbers(&self, stage: &str) -> Result<Vec<u32>, StoreError> {
        let dir = self
            .dir
            .join(self.stage_rel_checked(stage, layout::stage_rel)?);
        let mut numbers: Vec<u32> = self
            .entries(&dir)?
            .into_iter()
            .filter(|(_, is_dir)| *is_dir)
            .filter_map(|(name, _)| attempt_number(&name))
            .collect();
        numbers.sort_unstable();
        Ok(numbers)
    }

    /// Attempt `number` of `stage` (which may not exist: each read says so).
    pub fn attempt(&self, stage: &str, number: u32) -> AttemptReader {
        let rel = layout::attempt_rel(stage, number);
        AttemptReader {
            dir: self.dir.join(&rel),
            run_dir: self.dir.clone(),
            rel,
            stage: stage.to_string(),
            number,
        }
    }

    /// Every attempt of `stage`, ascending.
    pub fn attempts(&self, stage: &str) -> Result<Vec<AttemptReader>, StoreError> {
        Ok(self
            .attempt_numbers(stage)?
            .into_iter()
            .map(|n| self.attempt(stage, n))
            .collect())
    }

    /// A run-relative JSON record.
    pub fn json<T: DeserializeOwned>(&self, rel: &str) -> Result<T, StoreError> {
        let path = self.dir.join(rel);
        let bytes = std::fs::read(&path).map_err(|e| self.read_error(&path, e))?;
        parse(&path, &bytes)
    }

    /// A run-relative JSON record; `None` when the file does not exist (in a run
    /// folder that does).
    pub(crate) fn json_if_any<T: DeserializeOwned>(
        &self,
        rel: &str,
    ) -> Result<Option<T>, StoreError> {
        let path = self.dir.join(rel);
        match self.bytes_if_any(rel)? {
            Some(bytes) => parse(&path, &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// A run-relative file's bytes; `None` when it does not exist (in a run folder
    /// that does).
    pub(crate) fn bytes_if_any(&self, rel: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.dir.join(rel);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == ErrorKind::NotFound && self.dir.is_dir() => Ok(None),
            Err(e) => Err(self.read_error(&path, e)),
        }
    }

    fn stage_rel_checked(&self, id: &str, rel: fn(&str) -> String) -> Result<String, StoreError> {
        if !is_safe_component(id) {
            return Err(StoreError::UnsafePath(id.to_string()));
        }
        Ok(rel(id))
    }

    /// The entries of a folder in the run (name, is a folder); none when the
    /// folder does not exist in a run folder that does.
    fn entries(&self, dir: &Path) -> Result<Vec<(String, bool)>, StoreError> {
        let read = match std::fs::read_dir(dir) {
            Ok(r) => r,
            Err(e) if e.kind() == ErrorKind::NotFound && self.dir.is_dir() => return Ok(Vec::new()),
            Err(e) => return Err(self.read_error(dir, e)),
        };
        Ok(read
            .flatten()
            .filter_map(|e| {
                let is_dir = e.file_type().ok()?.is_dir();
                Some((e.file_name().into_string().ok()?, is_dir))
            })
            .collect())
    }

    fn read_error(&self, path: &Path, e: std::io::Error) -> StoreError {
        read_error(&self.dir, path, e)
    }
}

/// One attempt folder, read on demand: every record is optional, since a stage
/// can stop at any point (before the spawn, before verification, …).
#[derive(Debug, Clone)]
pub struct AttemptReader {
    run_dir: PathBuf,
    dir: PathBuf,
    rel: String,
    stage: String,
    number: u32,
}

impl AttemptReader {
    pub fn stage(&self) -> &str {
        &self.stage
    }

    pub fn number(&self) -> u32 {
        self.number
    }

    /// `stages/<stage>/attempt-NNN`, relative to the run folder.
    pub fn rel(&self) -> &str {
        &self.rel
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the attempt folder exists.
    pub fn exists(&self) -> bool {
        self.dir.is_dir()
    }

    /// The path of one of its files (a name from [`layout::attempt`]).
    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// The run-relative path of one of its files.
    pub fn rel_of(&self, file: &str) -> String {
        layout::in_attempt(&self.rel, file)
    }

    /// Whether the attempt has that file.
    pub fn has(&self, file: &str) -> bool {
        self.dir.join(file).is_file()
    }

    /// The size of that file, if it exists.
    pub fn len(&self, file: &str) -> Option<u64> {
        std::fs::metadata(self.dir.join(file)).ok().map(|m| m.len())
    }

    /// A JSON record of the attempt, as a typed record.
    pub fn json<T: DeserializeOwned>(&self, file: &str) -> Result<T, StoreError> {
        let path = self.dir.join(file);
        let bytes = std::fs::read(&path).map_err(|e| read_error(&self.run_dir, &path, e))?;
        parse(&path, &bytes)
    }

    /// A JSON record of the attempt, or `None` when it is missing or unreadable
    /// (for display and for decisions that treat both alike).
    pub fn json_opt<T: DeserializeOwned>(&self, file: &str) -> Option<T> {
        // No error to explain: skip the check of whether the run folder is gone.
        serde_json::from_slice(&self.bytes(file)?).ok()
    }

    /// The bytes of one of its files, if it can be read.
    pub fn bytes(&self, file: &str) -> Option<Vec<u8>> {
        std::fs::read(self.dir.join(file)).ok()
    }

    /// A log named by one of its records (a verification command's): only a plain
    /// file name in the attempt folder is followed.
    pub fn named_log(&self, name: &str) -> Option<Vec<u8>> {
        if !is_safe_component(name) {
            return None;
        }
        self.bytes(name)
    }
}

fn parse<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// A missing file in a run folder that is itself gone says so: the run was
/// deleted (or moved) while it was read.
fn read_error(run_dir: &Path, path: &Path, e: std::io::Error) -> StoreError {
    if e.kind() == ErrorKind::NotFound && !run_dir.is_dir() {
        return StoreError::RunGone(run_dir.to_path_buf());
    }
    StoreError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

#[cfg(test)]
#[path = "reader_tests.rs"]
mod tests;
