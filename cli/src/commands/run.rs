//! `specbridge run`: the command line into session settings, the session, and
//! what it ended with.

use std::path::{Path, PathBuf};

use specbridge_stages::session::{
    ReplaySettings, RunSession, ScaffoldSettings, SessionEnd, SessionKind, SessionSettings,
};

use crate::args::{ReplayMissing, RunArgs};
use crate::commands::Workspace;
use crate::error::CliResult;
use crate::printer::Printer;
use crate::view::{summary, Watcher};

pub(super) fn run(ws: &Workspace, printer: Printer, args: RunArgs) -> CliResult {
    let json_out = args.overrides.json;
    // Paths on the command line are the user's, relative to where they stand, even
    // when the run happens in a scaffold; only `-f` names a file inside it.
    let file = match &args.scaffold {
        Some(_) => args.file.file.clone(),
        None => args.file.file.clone().map(|f| ws.pipeline_path(Some(f))),
    };
    let settings = SessionSettings {
        root: ws.root.clone(),
        file,
        given: args.overrides.given(&args.only)?,
        refresh_runner: args.overrides.refresh_runner,
        dry_run: args.dry_run,
        kind: SessionKind::Run {
            replay: ReplaySettings {
                from: args.replay.replay.as_deref().map(from_cwd),
                live_when_missing: args.replay.replay_missing == ReplayMissing::Live,
            },
            scaffold: args.scaffold.as_deref().map(|dir| ScaffoldSettings {
                from: from_cwd(dir),
                keep: !args.no_keep,
            }),
        },
    };
    let watcher = Watcher::new(printer, json_out);
    let end = RunSession::new(settings, watcher.clone()).run();
    watcher.finish();
    let end = end?;
    summary::ended(printer, &end, json_out);
    let code = end.exit_code();
    if matches!(end, SessionEnd::Planned { .. }) {
        // The process ends once the plan is printed (as `validate` does with
        // its pipeline): freeing every planned stage returns nothing to anyone.
        std::mem::forget(end);
    }
    Ok(code)
}

/// A path given on the command line, relative to the current directory.
fn from_cwd(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().map_or_else(|_| p.to_path_buf(), |d| d.join(p))
    }
}
