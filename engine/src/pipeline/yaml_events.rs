//! libyaml's event stream, read directly: the parser serde_yaml itself runs,
//! without serde_yaml copying every event into a list and then replaying it
//! through serde (which costs more than libyaml's own parse on a large pipeline).
//!
//! This is the crate's one use of `unsafe-libyaml`, kept to the calls serde_yaml
//! makes, in the order it makes them: initialize, UTF-8 encoding, a string input,
//! parse one event at a time, delete each event, delete the parser.

use std::marker::PhantomData;
use std::mem::MaybeUninit;

use unsafe_libyaml as unsafe_sys;

/// One event, as much of it as [`super::yaml_json`] needs.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Event<'e> {
    StreamStart,
    StreamEnd,
    DocumentStart,
    DocumentEnd,
    Alias,
    Scalar {
        value: &'e [u8],
        plain: bool,
        tagged: bool,
    },
    SequenceStart {
        tagged: bool,
        at: Mark,
    },
    SequenceEnd,
    MappingStart {
        tagged: bool,
        at: Mark,
    },
    MappingEnd,
}

/// Where an event starts, as serde_yaml reports it: line and column from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Mark {
    pub(super) line: usize,
    pub(super) column: usize,
}

/// A parser over `input`, which it borrows for as long as it lives.
pub(super) struct Events<'i> {
    // libyaml keeps a pointer to the parser inside the parser (its string
    // reader's data), so the parser must not move: it lives on the heap.
    parser: Box<MaybeUninit<unsafe_sys::yaml_parser_t>>,
    failed: bool,
    input: PhantomData<&'i [u8]>,
}

impl<'i> Events<'i> {
    pub(super) fn new(input: &'i str) -> Events<'i> {
        let mut parser = Box::new(MaybeUninit::<unsafe_sys::yaml_parser_t>::uninit());
        let p = parser.as_mut_ptr();
        // SAFETY: `p` points at writable memory for a parser, which
        // `yaml_parser_initialize` fills in whole; the input outlives the parser
        // (the `'i` borrow), and the parser is deleted exactly once, in `drop`.
        unsafe {
            // It fails only when it cannot allocate, as serde_yaml assumes too.
            assert!(
                unsafe_sys::yaml_parser_initialize(p).ok,
                "failed to allocate a YAML parser"
            );
            unsafe_sys::yaml_parser_set_encoding(p, unsafe_sys::YAML_UTF8_ENCODING);
            unsafe_sys::yaml_parser_set_input_string(p, input.as_ptr(), input.len() as u64);
        }
        Events {
            parser,
            failed: false,
            input: PhantomData,
        }
    }

    /// The next event handed to `f`, or None once the input is not valid YAML
    /// (and for every call after that).
    pub(super) fn next<T>(&mut self, f: impl FnOnce(Event<'_>) -> T) -> Option<T> {
        if self.failed {
            return None;
        }
        let mut raw = MaybeUninit::<unsafe_sys::yaml_event_t>::uninit();
        // SAFETY: the parser was initialized in `new` and has not failed (libyaml
        // must not be asked again after an error); `raw` is filled in by a
        // successful parse, and deleted once below, after `f` is done with the
        // bytes it borrows.
        unsafe {
            if unsafe_sys::yaml_parser_parse(self.parser.as_mut_ptr(), raw.as_mut_ptr()).fail {
                self.failed = true;
                return None;
            }
            let raw = raw.assume_init_mut();
            let out = f(view(raw));
            unsafe_sys::yaml_event_delete(raw);
            Some(out)
        }
    }
}

impl Drop for Events<'_> {
    fn drop(&mut self) {
        // SAFETY: initialized in `new`, deleted only here.
        unsafe { unsafe_sys::yaml_parser_delete(self.parser.as_mut_ptr()) }
    }
}

/// # Safety
/// `raw` is an event a successful `yaml_parser_parse` filled in, not yet deleted.
unsafe fn view(raw: &unsafe_sys::yaml_event_t) -> Event<'_> {
    // SAFETY (every union read): the field read is the one `type_` names.
    unsafe {
        match raw.type_ {
            unsafe_sys::YAML_STREAM_START_EVENT => Event::StreamStart,
            unsafe_sys::YAML_STREAM_END_EVENT => Event::StreamEnd,
            unsafe_sys::YAML_DOCUMENT_START_EVENT => Event::DocumentStart,
            unsafe_sys::YAML_DOCUMENT_END_EVENT => Event::DocumentEnd,
            unsafe_sys::YAML_ALIAS_EVENT => Event::Alias,
            unsafe_sys::YAML_SCALAR_EVENT => {
                let s = &raw.data.scalar;
                let value = if s.length == 0 {
                    &[][..]
                } else {
                    std::slice::from_raw_parts(s.value, s.length as usize)
                };
                Event::Scalar {
                    value,
                    plain: s.style == unsafe_sys::YAML_PLAIN_SCALAR_STYLE,
                    tagged: !s.tag.is_null(),
                }
            }
            unsafe_sys::YAML_SEQUENCE_START_EVENT => Event::SequenceStart {
                tagged: !raw.data.sequence_start.tag.is_null(),
                at: mark(raw),
            },
            unsafe_sys::YAML_SEQUENCE_END_EVENT => Event::SequenceEnd,
            unsafe_sys::YAML_MAPPING_START_EVENT => Event::MappingStart {
                tagged: !raw.data.mapping_start.tag.is_null(),
                at: mark(raw),
            },
            unsafe_sys::YAML_MAPPING_END_EVENT => Event::MappingEnd,
            // An empty event, libyaml's answer when asked past the stream's end
            // (which the readers never do): an alias stands in for "something
            // only the general reading reads".
            _ => Event::Alias,
        }
    }
}

fn mark(raw: &unsafe_sys::yaml_event_t) -> Mark {
    Mark {
        line: raw.start_mark.line as usize + 1,
        column: raw.start_mark.column as usize + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Option<Vec<String>> {
        let mut events = Events::new(text);
        let mut out = Vec::new();
        loop {
            let e = events.next(|e| format!("{e:?}"))?;
            let end = e == "StreamEnd";
            out.push(e);
            if end {
                return Some(out);
            }
        }
    }

    #[test]
    fn events_come_in_document_order_with_scalar_styles_and_tags() {
        let got = all("a: [1, 'x']\nb: !t {}\n").unwrap();
        let want = [
            "StreamStart",
            "DocumentStart",
            "MappingStart { tagged: false, at: Mark { line: 1, column: 1 } }",
            "Scalar { value: [97], plain: true, tagged: false }",
            "SequenceStart { tagged: false, at: Mark { line: 1, column: 4 } }",
            "Scalar { value: [49], plain: true, tagged: false }",
            "Scalar { value: [120], plain: false, tagged: false }",
            "SequenceEnd",
            "Scalar { value: [98], plain: true, tagged: false }",
            "MappingStart { tagged: true, at: Mark { line: 2, column: 4 } }",
            "MappingEnd",
            "MappingEnd",
            "DocumentEnd",
            "StreamEnd",
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn an_error_ends_the_stream_for_good() {
        let mut events = Events::new("a: [1\n");
        let mut seen = 0;
        while events.next(|_| ()).is_some() {
            seen += 1;
            assert!(seen < 100, "the broken input never failed");
        }
        assert!(events.next(|_| ()).is_none());
        assert!(events.next(|_| ()).is_none());
    }
}
