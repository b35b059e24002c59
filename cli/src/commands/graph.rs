//! `specbridge graph`: the stage graph as Mermaid, dot or JSON.

use specbridge_engine::graph::GraphView;
use specbridge_engine::pipeline::validate::load_and_validate;
use specbridge_engine::store::{layout, PlanRecord};

use crate::args::{GraphArgs, GraphFormat};
use crate::commands::Workspace;
use crate::diagnostics::{display_path, exit_code, print as print_diagnostics, relative, summary};
use crate::error::CliResult;
use crate::printer::Printer;

pub(super) fn run(ws: &Workspace, args: GraphArgs, printer: Printer) -> CliResult {
    if let Some(selector) = &args.run {
        let view = of_run(ws, selector)?;
        print(&printer, &view, args.format);
        return Ok(0);
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
    let view = GraphView::of_pipeline(&valid.pipeline.file, &valid.graph);
    print(&printer, &view, args.format);
    Ok(exit_code(&valid.warnings))
}

fn print(printer: &Printer, view: &GraphView, format: GraphFormat) {
    match format {
        GraphFormat::Mermaid => printer.out(view.to_mermaid().trim_end()),
        GraphFormat::Dot => printer.out(view.to_dot().trim_end()),
        GraphFormat::Json => printer.json(&view.to_json()),
    }
}

/// The expanded graph of a recorded run, with each node's status.
fn of_run(ws: &Workspace, selector: &str) -> CliResult<GraphView> {
    let reader = ws.run(selector)?;
    let plan: PlanRecord = reader.json(layout::PLAN)?;
    let stages = reader.stages_in_plan_order()?;
    Ok(GraphView::of_run(&plan, |id| {
        stages
            .iter()
            .find(|s| s.stage_id == id)
            .map(|s| s.status.as_str().to_string())
    }))
}
