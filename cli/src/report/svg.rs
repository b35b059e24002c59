//! The two drawings: the stage graph (columns by depth) and the timeline of
//! attempts. Plain SVG elements with a CSS class per status; no script.

use std::collections::HashMap;
use std::fmt::Write;

use super::timeline::Bar;
use super::{esc, status_class};

const NODE_W: i64 = 180;
const NODE_H: i64 = 24;
const COL_W: i64 = 220;
const ROW_H: i64 = 32;
const PAD: i64 = 8;

/// One node: id, status, and the ids it needs.
pub(super) struct GraphNode<'a> {
    pub id: &'a str,
    pub status: &'a str,
    pub needs: &'a [String],
}

/// The graph, each node in the column of its longest chain of needs.
pub(super) fn graph(nodes: &[GraphNode<'_>]) -> String {
    let index: HashMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect();
    let mut depth: Vec<Option<i64>> = vec![None; nodes.len()];
    fn depth_of(
        i: usize,
        nodes: &[GraphNode<'_>],
        index: &HashMap<&str, usize>,
        depth: &mut Vec<Option<i64>>,
        guard: usize,
    ) -> i64 {
        if let Some(d) = depth[i] {
            return d;
        }
        // A cycle cannot be recorded, but a hand-edited record must not hang the page.
        if guard > nodes.len() {
            return 0;
        }
        let d = nodes[i]
            .needs
            .iter()
            .filter_map(|n| index.get(n.as_str()))
            .map(|&j| depth_of(j, nodes, index, depth, guard + 1) + 1)
            .max()
            .unwrap_or(0);
        depth[i] = Some(d);
        d
    }
    let mut rows_in: HashMap<i64, i64> = HashMap::new();
    let mut pos = Vec::with_capacity(nodes.len());
    for i in 0..nodes.len() {
        let d = depth_of(i, nodes, &index, &mut depth, 0);
        let row = rows_in.entry(d).or_insert(0);
        pos.push((PAD + d * COL_W, PAD + *row * ROW_H));
        *row += 1;
    }
    let width = PAD * 2 + (rows_in.keys().max().copied().unwrap_or(0) + 1) * COL_W;
    let height = PAD * 2 + rows_in.values().max().copied().unwrap_or(1) * ROW_H;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="dag" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="stage graph">"#
    );
    for (i, n) in nodes.iter().enumerate() {
        for need in n.needs {
            if let Some(&j) = index.get(need.as_str()) {
                let (x1, y1) = (pos[j].0 + NODE_W, pos[j].1 + NODE_H / 2);
                let (x2, y2) = (pos[i].0, pos[i].1 + NODE_H / 2);
                let _ = write!(
                    s,
                    r#"<path class="edge" d="M{x1} {y1} C{} {y1} {} {y2} {x2} {y2}"/>"#,
                    x1 + 20,
                    x2 - 20
                );
            }
        }
    }
    for (i, n) in nodes.iter().enumerate() {
        let (x, y) = pos[i];
        let label: String = n.id.chars().take(24).collect();
        let _ = write!(
            s,
            r##"<a href="#stage-{i}"><g class="node s-{class}" data-stage="{id}" data-status="{status}"><title>{id}: {status}</title><rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="4"/><text x="{tx}" y="{ty}">{label}</text></g></a>"##,
            class = status_class(n.status),
            id = esc(n.id),
            status = esc(n.status),
            tx = x + 6,
            ty = y + 16,
            label = esc(&label),
        );
    }
    s.push_str("</svg>");
    s
}

/// The attempts on one time axis, a row each.
pub(super) fn timeline(bars: &[Bar]) -> String {
    const LABEL_W: i64 = 220;
    const PLOT_W: i64 = 760;
    const BAR_H: i64 = 12;
    const BAR_ROW: i64 = 16;
    let Some(start) = bars.iter().map(|b| b.start_ms).min() else {
        return "<p>No stage started.</p>".into();
    };
    let end = bars
        .iter()
        .map(|b| b.end_ms.unwrap_or(b.start_ms))
        .max()
        .unwrap_or(start)
        .max(start + 1);
    let span = (end - start) as f64;
    let height = PAD * 2 + bars.len() as i64 * BAR_ROW + 16;
    let width = LABEL_W + PLOT_W + PAD * 2;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="gantt" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="timeline">"#
    );
    for (i, b) in bars.iter().enumerate() {
        let y = PAD + i as i64 * BAR_ROW;
        let x = LABEL_W + ((b.start_ms - start) as f64 / span * PLOT_W as f64) as i64;
        let w = (((b.end_ms.unwrap_or(b.start_ms) - b.start_ms) as f64 / span * PLOT_W as f64)
            as i64)
            .max(2);
        let ms = b.end_ms.map(|e| e - b.start_ms);
        let label: String = format!("{} #{}", b.stage, b.attempt)
            .chars()
            .take(32)
            .collect();
        let _ = write!(
            s,
            r#"<g class="bar s-{class}"><title>{stage} attempt {attempt}: {status}, {dur}</title><text x="0" y="{ty}">{label}</text><rect x="{x}" y="{y}" width="{w}" height="{BAR_H}"/></g>"#,
            class = status_class(&b.status),
            stage = esc(&b.stage),
            attempt = b.attempt,
            status = esc(&b.status),
            dur = esc(&crate::table::duration(ms.map(|m| m.max(0) as u64))),
            ty = y + 10,
            label = esc(&label),
        );
    }
    let _ = write!(
        s,
        r#"<text class="axis" x="{LABEL_W}" y="{ay}">0</text><text class="axis" x="{ex}" y="{ay}" text-anchor="end">{total}</text></svg>"#,
        ay = height - 4,
        ex = LABEL_W + PLOT_W,
        total = esc(&crate::table::duration(Some((end - start) as u64))),
    );
    s
}
