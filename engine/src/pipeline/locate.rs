//! Where each node of a YAML document is, so that a diagnostic about
//! `stages[2].needs[0]` can point at its line and column.
//!
//! serde_yaml gives a location only for the first error it meets; this index is
//! built from yaml-rust2's marked events and covers every key and value.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

use crate::diagnostic::Location;

/// A path into a document: `stages[2].needs[0]`, `runner.env.TOKEN`; `""` is the root.
pub(crate) fn child_key(parent: &str, key: &str) -> String {
    let mut path = parent.to_string();
    push_key(&mut path, key);
    path
}

pub(crate) fn child_index(parent: &str, index: usize) -> String {
    let mut path = parent.to_string();
    push_index(&mut path, index);
    path
}

/// `path` made the path of its child `key`, in place: a walk over a whole
/// document extends and truncates one buffer instead of allocating a path per node.
pub(crate) fn push_key(path: &mut String, key: &str) {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !plain {
        path.push('[');
        path.push_str(&serde_json::Value::from(key).to_string());
        path.push(']');
        return;
    }
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

/// `path` made the path of its item `index`, in place (see [`push_key`]).
pub(crate) fn push_index(path: &mut String, index: usize) {
    use std::fmt::Write;
    let _ = write!(path, "[{index}]");
}

/// The path of a JSON pointer (`/stages/0/needs`) into `doc`, in the same notation
/// as [`child_key`]; the document decides whether a segment is an index or a key.
pub(crate) fn pointer_to_path(doc: &serde_json::Value, pointer: &str) -> String {
    let mut path = String::new();
    let mut node = Some(doc);
    for raw in pointer.split('/').skip(1) {
        let seg = raw.replace("~1", "/").replace("~0", "~");
        match node {
            Some(serde_json::Value::Array(items)) => match seg.parse::<usize>() {
                Ok(i) => {
                    path = child_index(&path, i);
                    node = items.get(i);
                }
                Err(_) => {
                    path = child_key(&path, &seg);
                    node = None;
                }
            },
            Some(serde_json::Value::Object(map)) => {
                path = child_key(&path, &seg);
                node = map.get(&seg);
            }
            _ => {
                path = child_key(&path, &seg);
                node = None;
            }
        }
    }
    path
}

/// The parent of a path (`stages[2].needs` for `stages[2].needs[0]`); None at the root.
pub(crate) fn parent_path(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    // A quoted key may contain dots or brackets; its `[` is the real boundary.
    if path.ends_with("\"]") {
        if let Some(open) = path.rfind("[\"") {
            return Some(&path[..open]);
        }
    }
    Some(path.rfind(['.', '[']).map_or("", |cut| &path[..cut]))
}

/// Positions of one node: its key (for a mapping entry) and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodePosition {
    pub key: Option<Location>,
    pub value: Location,
}

/// Every node's position in one YAML document. Built on first use: a valid file
/// needs no position, and the marked parse costs as much as the load itself.
#[derive(Debug, Clone, Default)]
pub struct SourceIndex {
    text: std::sync::Arc<str>,
    nodes: std::sync::OnceLock<HashMap<String, NodePosition>>,
}

impl SourceIndex {
    /// Index the first document of `text`. A document that does not parse gives
    /// the positions of what came before the error.
    pub fn build(text: &str) -> Self {
        SourceIndex {
            text: text.into(),
            nodes: std::sync::OnceLock::new(),
        }
    }

    fn nodes(&self) -> &HashMap<String, NodePosition> {
        self.nodes.get_or_init(|| {
            let mut builder = Builder::default();
            let mut parser = Parser::new_from_str(&self.text);
            let _ = parser.load(&mut builder, false);
            builder.nodes
        })
    }

    pub fn get(&self, path: &str) -> Option<NodePosition> {
        self.nodes().get(path).copied()
    }

    /// Where to point for a node: its key when it is a mapping entry, else its value.
    pub fn key(&self, path: &str) -> Option<Location> {
        self.get(path).map(|p| p.key.unwrap_or(p.value))
    }

    /// Where the node's value starts.
    pub fn value(&self, path: &str) -> Option<Location> {
        self.get(path).map(|p| p.value)
    }

    /// The key position of the node, or of its nearest ancestor that exists (for
    /// a missing key, the mapping that should hold it).
    pub fn nearest(&self, path: &str) -> Option<Location> {
        let mut p = Some(path);
        while let Some(cur) = p {
            if let Some(loc) = self.key(cur) {
                return Some(loc);
            }
            p = parent_path(cur);
        }
        None
    }
}

enum Frame {
    Map {
        path: String,
        /// No entry read yet: the mapping's position is still to be corrected.
        empty: bool,
        /// The key just read, waiting for its value.
        key: Option<(String, Location)>,
    },
    Seq {
        path: String,
        next: usize,
    },
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    nodes: HashMap<String, NodePosition>,
    done: bool,
}

fn location(mark: Marker) -> Location {
    // yaml-rust2 counts lines from 1 and columns from 0.
    Location {
        line: mark.line(),
        column: mark.col() + 1,
    }
}

impl Builder {
    /// Places a node starting at `at`; returns its path, or None when the node is a
    /// mapping key.
    fn place(&mut self, at: Location, key_text: Option<&str>) -> Option<String> {
        let (path, key) = match self.stack.last_mut() {
            None => (String::new(), None),
            Some(Frame::Seq { path, next }) => {
                let p = child_index(path, *next);
                *next += 1;
                (p, None)
            }
            Some(Frame::Map { path, key, empty }) => match key.take() {
                None => {
                    if std::mem::take(empty) {
                        // yaml-rust2 marks a block mapping after its first key;
                        // its first key is where it starts.
                        if let Some(node) = self.nodes.get_mut(path.as_str()) {
                            node.value = node.value.min(at);
                        }
                    }
                    // A key: remember it; complex keys get a placeholder name.
                    *key = Some((key_text.unwrap_or("?").to_string(), at));
                    return None;
                }
                Some((k, key_at)) => (child_key(path, &k), Some(key_at)),
            },
        };
        self.nodes
            .entry(path.clone())
            .or_insert(NodePosition { key, value: at });
        Some(path)
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        if self.done {
            return;
        }
        let at = location(mark);
        match ev {
            Event::Scalar(text, ..) => {
                self.place(at, Some(&text));
            }
            Event::Alias(_) => {
                self.place(at, None);
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let is_map = matches!(ev, Event::MappingStart(..));
                let path = self.place(at, None).unwrap_or_else(|| "?".into());
                self.stack.push(if is_map {
                    Frame::Map {
                        path,
                        key: None,
                        empty: true,
                    }
                } else {
                    Frame::Seq { path, next: 0 }
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
            }
            Event::DocumentEnd => self.done = true,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
version: 1
stages:
  - id: a
    needs: [b, c]
  - id: \"b\"
    output: { schema: builtin:document }
runner:
  env:
    A.B: x
";

    fn at(line: usize, column: usize) -> Option<Location> {
        Some(Location { line, column })
    }

    #[test]
    fn keys_and_values_have_one_based_positions() {
        let ix = SourceIndex::build(DOC);
        assert_eq!(ix.key("version"), at(1, 1));
        assert_eq!(ix.value("version"), at(1, 10));
        assert_eq!(ix.key("stages[0].id"), at(3, 5));
        assert_eq!(ix.value("stages[0].needs[1]"), at(4, 16));
        assert_eq!(ix.key("stages[1].id"), at(5, 5));
        assert_eq!(ix.value("stages[1].output.schema"), at(6, 23));
        assert_eq!(ix.key("runner.env[\"A.B\"]"), at(9, 5));
        // Mappings start at their first key (block) or their brace (flow).
        assert_eq!(ix.value("stages[1]"), at(5, 5));
        assert_eq!(ix.value("stages[1].output"), at(6, 13));
        assert_eq!(ix.value(""), at(1, 1));
    }

    #[test]
    fn nearest_walks_up_to_an_existing_node() {
        let ix = SourceIndex::build(DOC);
        assert_eq!(
            ix.nearest("stages[1].output.document"),
            ix.key("stages[1].output")
        );
        assert_eq!(ix.nearest("stages[0].needs[7]"), ix.key("stages[0].needs"));
    }

    #[test]
    fn pointers_become_paths() {
        let doc = serde_json::json!({"stages": [{"needs": ["x"]}], "env": {"0": 1}});
        assert_eq!(
            pointer_to_path(&doc, "/stages/0/needs/0"),
            "stages[0].needs[0]"
        );
        assert_eq!(pointer_to_path(&doc, "/env/0"), "env.0");
        assert_eq!(pointer_to_path(&doc, ""), "");
    }

    #[test]
    fn parents() {
        assert_eq!(parent_path("stages[2].needs[0]"), Some("stages[2].needs"));
        assert_eq!(parent_path("stages[2].needs"), Some("stages[2]"));
        assert_eq!(parent_path("stages[2]"), Some("stages"));
        assert_eq!(parent_path("stages"), Some(""));
        assert_eq!(parent_path("runner.env[\"A.B\"]"), Some("runner.env"));
        assert_eq!(parent_path(""), None);
    }
}
