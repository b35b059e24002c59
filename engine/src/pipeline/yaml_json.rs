//! YAML read straight into a JSON value, from libyaml's events
//! ([`super::yaml_events`]): the same parser as serde_yaml's, without its list
//! of every event replayed through serde, and without serde_yaml's own `Value`
//! in between (each of which costs as much again as the parse on a large
//! pipeline).
//!
//! Only the plain cases are read here: string, number, boolean or null keys and
//! untagged values without aliases. Anything else (a tag, an alias, a key that
//! is a list or a mapping, a key given twice, an integer beyond 64 bits, a float
//! key, more than one document, or text that is not YAML) is declined, and the
//! caller reads the file the general way (serde_yaml's `Value`), which gives the
//! same JSON for the plain cases and its own answer or error for the rest.
//! Nesting deeper than serde_yaml allows is refused here, with serde_yaml's own
//! error at the same place: libyaml takes time quadratic in the depth of an
//! unclosed flow, so a 200 KB file of `[` kept the general reading busy for
//! minutes, where this one stops at the first level too many. A declined
//! document is still followed to its end for its depth alone, so the general
//! reading is never handed one that deep (a key given twice before the depth
//! would have been serde_yaml's first error; the file is refused either way).
//!
//! A plain scalar means here what it means to serde_yaml: [`resolve`] follows
//! its rules, and the tests hold the two readings to each other on random
//! documents.

use std::borrow::Cow;
use std::sync::mpsc;
use std::thread;

use serde_json::{Map, Number, Value};

use super::yaml_events::{Event, Events, Mark};

/// serde_yaml reads 128 nested lists and mappings and refuses the 129th.
const MAX_DEPTH: usize = 128;

/// From this size on, libyaml parses on a thread of its own while this one
/// builds the document from what it has parsed so far: on a large pipeline the
/// building is a fifth of the parse, and a thread costs less than a 64 KiB parse.
const PIPELINED_FROM: usize = 64 * 1024;

/// Events handed from the parsing thread to the building one at a time.
const BATCH: usize = 1024;

/// What the plain reading made of a document.
#[derive(Debug, PartialEq)]
pub(super) enum Plain {
    Read(Value),
    /// Something only the general reading handles, or no YAML at all (the
    /// general reading says where).
    Declined,
    /// A list or mapping nested one level deeper than serde_yaml reads, here:
    /// its "recursion limit exceeded", which it would reach too.
    TooDeep(Mark),
}

/// The document as JSON, if it is plain.
pub(super) fn plain_yaml_to_json(text: &str) -> Plain {
    read(text, text.len() >= PIPELINED_FROM)
}

/// [`plain_yaml_to_json`], parsing on a second thread when `pipelined` (and a
/// thread can be had: a refused one reads on this thread alone, the same way).
fn read(text: &str, pipelined: bool) -> Plain {
    if pipelined {
        if let Some(read) = read_pipelined(text) {
            return read;
        }
    }
    let mut events = Events::new(text);
    let mut builder = Builder::default();
    loop {
        match events.next(|event| builder.feed(Piece::of(event)?)) {
            Some(Some(read)) => return read,
            Some(None) => {}
            // No YAML from here on.
            None => return builder.stopped(),
        }
    }
}

/// None when no thread could be had.
fn read_pipelined(text: &str) -> Option<Plain> {
    let (send, receive) = mpsc::sync_channel::<Vec<Piece>>(8);
    thread::scope(|scope| {
        let parser = thread::Builder::new()
            .name("specbridge-yaml".into())
            .spawn_scoped(scope, move || parse_into(text, send))
            .ok()?;
        let mut builder = Builder::default();
        // Where libyaml fails, the parser stops: the channel closes with no
        // `End` in it.
        let read = 'read: loop {
            let Ok(batch) = receive.recv() else {
                break builder.stopped();
            };
            for piece in batch {
                if let Some(read) = builder.feed(piece) {
                    break 'read read;
                }
            }
        };
        // Too deep: the parser's next hand-off fails and it stops.
        drop(receive);
        if let Err(panic) = parser.join() {
            std::panic::resume_unwind(panic);
        }
        Some(read)
    })
}

fn parse_into(text: &str, send: mpsc::SyncSender<Vec<Piece>>) {
    let mut events = Events::new(text);
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        let Some(piece) = events.next(Piece::owned) else {
            // Not YAML from here on: what came before still goes to the
            // builder, which may have found it too deep first.
            let _ = send.send(batch);
            return;
        };
        let Some(piece) = piece else {
            continue;
        };
        let end = matches!(piece, Piece::End);
        batch.push(piece);
        if end || batch.len() == BATCH {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            if send.send(full).is_err() || end {
                return;
            }
        }
    }
}

/// An event inside the document, as the builder takes it.
enum Piece<'t> {
    Scalar {
        text: Cow<'t, str>,
        plain: bool,
    },
    /// The start of a list or a mapping, and whether it carries a tag.
    Open {
        map: bool,
        tagged: bool,
        at: Mark,
    },
    /// The end of a list or a mapping.
    Close,
    /// Something only the general reading reads (an alias, a tagged scalar,
    /// a scalar that is not UTF-8), with no depth of its own.
    Unread,
    /// The end of the stream.
    End,
}

impl<'e> Piece<'e> {
    /// None for an event with nothing to build (the stream's and the
    /// document's start and end).
    fn of(event: Event<'e>) -> Option<Piece<'e>> {
        Some(match event {
            Event::StreamStart | Event::DocumentStart | Event::DocumentEnd => return None,
            Event::StreamEnd => Piece::End,
            Event::Scalar {
                value,
                plain,
                tagged: false,
            } => match std::str::from_utf8(value) {
                Ok(text) => Piece::Scalar {
                    text: Cow::Borrowed(text),
                    plain,
                },
                Err(_) => Piece::Unread,
            },
            Event::SequenceStart { tagged, at } => Piece::Open {
                map: false,
                tagged,
                at,
            },
            Event::MappingStart { tagged, at } => Piece::Open {
                map: true,
                tagged,
                at,
            },
            Event::SequenceEnd | Event::MappingEnd => Piece::Close,
            Event::Scalar { tagged: true, .. } | Event::Alias => Piece::Unread,
        })
    }

    /// [`Piece::of`], owning its text, to be sent to another thread.
    fn owned(event: Event<'_>) -> Option<Piece<'static>> {
        Some(match Piece::of(event)? {
            Piece::Scalar { text, plain } => Piece::Scalar {
                text: Cow::Owned(text.into_owned()),
                plain,
            },
            Piece::Open { map, tagged, at } => Piece::Open { map, tagged, at },
            Piece::Close => Piece::Close,
            Piece::Unread => Piece::Unread,
            Piece::End => Piece::End,
        })
    }
}

/// A list or mapping being filled in: where its items start on the builder's
/// stacks. Items wait there, not in a growing list or map of their own, so
/// each list and map is allocated once at its end, at its exact size (a
/// 10,000-stage pipeline's document is a third smaller, and the memory a
/// command touches first is what its time goes to: every new page a fault).
enum Open {
    List(usize),
    /// A mapping, and the key read whose value comes next.
    Map(usize, Option<String>),
}

#[derive(Default)]
struct Builder {
    open: Vec<Open>,
    /// The items of every open list, innermost last.
    items: Vec<Value>,
    /// The entries of every open mapping, innermost last.
    entries: Vec<(String, Value)>,
    root: Option<Value>,
    /// Once the document is declined, only its depth is followed (`depth`):
    /// what the general reading is given must be shallow enough for libyaml
    /// to read it in linear time.
    declined: bool,
    depth: usize,
    too_deep: Option<Mark>,
}

impl Builder {
    /// Take one piece; what the document is once the reading is over (at the
    /// stream's end, or once it is too deep).
    fn feed(&mut self, piece: Piece<'_>) -> Option<Plain> {
        match piece {
            Piece::End if self.declined => Some(Plain::Declined),
            // A stream with no document is null, as serde_yaml reads it.
            Piece::End => Some(Plain::Read(self.root.take().unwrap_or(Value::Null))),
            piece => (!self.take(piece)).then(|| self.stopped()),
        }
    }

    /// Why the reading stopped before the stream's end.
    fn stopped(&self) -> Plain {
        match self.too_deep {
            Some(at) => Plain::TooDeep(at),
            None => Plain::Declined,
        }
    }

    /// Take one piece of the document (not its end); false once it is too deep.
    fn take(&mut self, piece: Piece<'_>) -> bool {
        let depth = if self.declined {
            self.depth
        } else {
            self.open.len()
        };
        if let Piece::Open { at, .. } = &piece {
            if depth >= MAX_DEPTH {
                self.too_deep = Some(*at);
                return false;
            }
        }
        let unread = matches!(piece, Piece::Open { tagged: true, .. } | Piece::Unread);
        if !self.declined && !unread {
            if !self.build(piece) {
                self.decline();
            }
            return true;
        }
        if !self.declined {
            self.decline();
        }
        // Declined: the depth alone, a tagged start a level deeper.
        match piece {
            Piece::Open { .. } => self.depth += 1,
            Piece::Close => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }
        true
    }

    /// From here on the depth alone.
    fn decline(&mut self) {
        self.declined = true;
        self.depth = self.open.len();
        self.open = Vec::new();
        self.items = Vec::new();
        self.entries = Vec::new();
    }

    /// Build one piece into the document; false declines it.
    fn build(&mut self, piece: Piece<'_>) -> bool {
        match piece {
            Piece::Scalar { text, plain } => {
                let scalar = if plain {
                    match resolve(&text) {
                        Some(s) => s,
                        None => return false,
                    }
                } else {
                    Scalar::Str
                };
                if let Some(Open::Map(_, key @ None)) = self.open.last_mut() {
                    return match scalar.key(text) {
                        Some(k) => {
                            *key = Some(k);
                            true
                        }
                        None => false,
                    };
                }
                self.add(scalar.value(text))
            }
            Piece::Open { map: false, .. } => {
                self.open.push(Open::List(self.items.len()));
                true
            }
            Piece::Open { map: true, .. } => {
                self.open.push(Open::Map(self.entries.len(), None));
                true
            }
            Piece::Close => match self.open.pop() {
                Some(Open::List(start)) => {
                    let items = self.items.split_off(start);
                    self.add(Value::Array(items))
                }
                Some(Open::Map(start, None)) => {
                    let mut map = Map::with_capacity(self.entries.len() - start);
                    for (key, value) in self.entries.drain(start..) {
                        // A key given twice is the general reading's.
                        if map.insert(key, value).is_some() {
                            return false;
                        }
                    }
                    self.add(Value::Object(map))
                }
                Some(Open::Map(_, Some(_))) | None => false,
            },
            Piece::Unread | Piece::End => false,
        }
    }

    /// Place a finished value. A list or mapping as a key (a value where a key
    /// is due) and a second document (a second root) are the general reading's.
    fn add(&mut self, value: Value) -> bool {
        match self.open.last_mut() {
            Some(Open::List(_)) => self.items.push(value),
            Some(Open::Map(_, key)) => {
                let Some(key) = key.take() else {
                    return false;
                };
                self.entries.push((key, value));
            }
            None if self.root.is_none() => self.root = Some(value),
            None => return false,
        }
        true
    }
}

/// What an untagged plain scalar means to serde_yaml.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scalar {
    Null,
    Bool(bool),
    Unsigned(u64),
    Negative(i64),
    Float(f64),
    Str,
}

impl Scalar {
    fn value(self, text: Cow<'_, str>) -> Value {
        match self {
            Scalar::Null => Value::Null,
            Scalar::Bool(b) => Value::Bool(b),
            Scalar::Unsigned(n) => Value::from(n),
            Scalar::Negative(n) => Value::from(n),
            // `.nan` and `.inf` become null, as in the general reading.
            Scalar::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
            Scalar::Str => Value::String(text.into_owned()),
        }
    }

    /// The key as the general reading prints it (`1`, `true`, `null`); a float
    /// key is the general reading's to print.
    fn key(self, text: Cow<'_, str>) -> Option<String> {
        Some(match self {
            Scalar::Null => "null".to_string(),
            Scalar::Bool(b) => b.to_string(),
            Scalar::Unsigned(n) => n.to_string(),
            Scalar::Negative(n) => n.to_string(),
            Scalar::Float(_) => return None,
            Scalar::Str => text.into_owned(),
        })
    }
}

/// serde_yaml 0.9's reading of an untagged plain scalar, in its order: null,
/// boolean, integer (64-bit; a wider one is declined with None), float, string.
fn resolve(v: &str) -> Option<Scalar> {
    if matches!(v, "" | "~" | "null" | "Null" | "NULL") {
        return Some(Scalar::Null);
    }
    match v {
        "true" | "True" | "TRUE" => return Some(Scalar::Bool(true)),
        "false" | "False" | "FALSE" => return Some(Scalar::Bool(false)),
        _ => {}
    }
    // Most scalars are words: no integer or float starts with a letter other
    // than through `inf` and `nan`, which are strings when not written `.inf`.
    if v.as_bytes()[0].is_ascii_alphabetic() {
        return Some(Scalar::Str);
    }
    if let Some(n) = unsigned(v, u64::from_str_radix) {
        return Some(Scalar::Unsigned(n));
    }
    if let Some(n) = negative(v, i64::from_str_radix) {
        return Some(Scalar::Negative(n));
    }
    if unsigned(v, u128::from_str_radix).is_some() || negative(v, i128::from_str_radix).is_some() {
        return None;
    }
    if !leading_zero_digits(v) {
        if let Some(f) = float(v) {
            return Some(Scalar::Float(f));
        }
    }
    Some(Scalar::Str)
}

type Radix<T> = fn(&str, u32) -> Result<T, std::num::ParseIntError>;

/// `0x`, `0o` and `0b` prefixes, then decimal; an optional `+`. A sign right
/// after a prefix makes it no integer (Rust's parser would take a `+`).
fn unsigned<T>(v: &str, parse: Radix<T>) -> Option<T> {
    let u = v.strip_prefix('+').unwrap_or(v);
    for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(rest) = u.strip_prefix(prefix) {
            if rest.starts_with(['+', '-']) {
                return None;
            }
            if let Ok(n) = parse(rest, radix) {
                return Some(n);
            }
        }
    }
    if u.starts_with(['+', '-']) || leading_zero_digits(v) {
        return None;
    }
    parse(u, 10).ok()
}

/// `-0x`, `-0o` and `-0b` prefixes, then decimal.
fn negative<T>(v: &str, parse: Radix<T>) -> Option<T> {
    for (prefix, radix) in [("-0x", 16), ("-0o", 8), ("-0b", 2)] {
        if let Some(rest) = v.strip_prefix(prefix) {
            if let Ok(n) = parse(&format!("-{rest}"), radix) {
                return Some(n);
            }
        }
    }
    if leading_zero_digits(v) {
        return None;
    }
    parse(v, 10).ok()
}

/// A zero followed by digits, after an optional sign: a string in YAML 1.2.
fn leading_zero_digits(v: &str) -> bool {
    let v = v.strip_prefix(['-', '+']).unwrap_or(v);
    v.len() > 1 && v.starts_with('0') && v[1..].bytes().all(|b| b.is_ascii_digit())
}

/// `.inf`, `-.inf` and `.nan` in three spellings each, else a finite float as
/// Rust reads one.
fn float(v: &str) -> Option<f64> {
    let u = match v.strip_prefix('+') {
        Some(u) if u.starts_with(['+', '-']) => return None,
        Some(u) => u,
        None => v,
    };
    if matches!(u, ".inf" | ".Inf" | ".INF") {
        return Some(f64::INFINITY);
    }
    if matches!(v, "-.inf" | "-.Inf" | "-.INF") {
        return Some(f64::NEG_INFINITY);
    }
    if matches!(v, ".nan" | ".NaN" | ".NAN") {
        return Some(f64::NAN);
    }
    u.parse::<f64>().ok().filter(|f| f.is_finite())
}

#[cfg(test)]
mod tests;
