//! `specbridge resume RUN`: continue a run in its own folder (docs/resume.md),
//! through the same session as `run`.

use specbridge_stages::session::{RunSession, SessionKind, SessionSettings};

use crate::args::ResumeArgs;
use crate::commands::Workspace;
use crate::error::CliResult;
use crate::printer::Printer;
use crate::view::{summary, Watcher};

pub(super) fn run(ws: &Workspace, printer: Printer, args: ResumeArgs) -> CliResult {
    let json_out = args.overrides.json;
    let settings = SessionSettings {
        root: ws.root.clone(),
        // `-f`, else the path the run recorded.
        file: args.file.file.clone().map(|f| ws.pipeline_path(Some(f))),
        given: args.overrides.given(&[])?,
        refresh_runner: args.overrides.refresh_runner,
        dry_run: args.dry_run,
        kind: SessionKind::Resume {
            run: args.run.clone(),
            rerun: args.rerun.clone(),
            reverify: args.reverify,
        },
    };
    let watcher = Watcher::new(printer, json_out);
    let end = RunSession::new(settings, watcher.clone()).run();
    watcher.finish();
    let end = end?;
    summary::ended(printer, &end, json_out);
    Ok(end.exit_code())
}
