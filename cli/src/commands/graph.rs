//! `specbridge graph`: the stage graph as Mermaid, dot or JSON.

use specbridge_engine::graph::GraphView;
use specbridge_engine::pipeline::validate::load_and_validate;

use crate::args::{GraphArgs, GraphFormat};
use crate::commands::validate::{display_path, exit_code, print_diagnostics, relative, summary};
use crate::commands::Workspace;
use crate::error::{CliError, CliResult};
use crate::printer::Printer;

pub fn run(ws: &Workspace, args: GraphArgs, printer: Printer) -> CliResult {
    if args.run.is_some() {
        return Err(CliError::not_yet("graph --run"));
    }
    let path = ws.pipeline_path(args.file.file);
    let valid = match load_and_validate(&path, &ws.root) {
        Ok(v) => v,
        Err(diagnostics) => {
            let diagnostics = relative(diagnostics);
            print_diagnostics(&printer, &diagnostics);
            printer.err(summary(&display_path(&path), &diagnostics));
            return Ok(exit_code(&diagnostics));
        }
    };
    let view = GraphView::of_pipeline(&valid.pipeline.file);
    match args.format {
        GraphFormat::Mermaid => printer.out(view.to_mermaid().trim_end()),
        GraphFormat::Dot => printer.out(view.to_dot().trim_end()),
        GraphFormat::Json => printer.json(&view.to_json()),
    }
    Ok(exit_code(&valid.warnings))
}
