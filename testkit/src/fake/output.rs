//! Where the fake's print-mode output goes, per `--output-format`.

use std::io::Write;

use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    StreamJson,
}

impl Format {
    pub fn parse(value: Option<&str>) -> Format {
        match value {
            Some("json") => Format::Json,
            Some("stream-json") => Format::StreamJson,
            _ => Format::Text,
        }
    }
}

pub struct Output {
    pub format: Format,
}

impl Output {
    /// A stream-json event; other formats print nothing until the result.
    pub fn event(&mut self, event: &Value) {
        if self.format == Format::StreamJson {
            self.line(event);
        }
    }

    /// The end of the run: the envelope, or in text mode its `result` (error
    /// subtypes have none, and print their `errors` instead).
    pub fn result(&mut self, envelope: &Value) {
        match self.format {
            Format::StreamJson | Format::Json => self.line(envelope),
            Format::Text => {
                let text = match envelope.get("result").and_then(Value::as_str) {
                    Some(result) => result.to_owned(),
                    None => {
                        let subtype = envelope["subtype"].as_str().unwrap_or("error");
                        let errors: Vec<&str> = envelope
                            .get("errors")
                            .and_then(Value::as_array)
                            .map(|e| e.iter().filter_map(Value::as_str).collect())
                            .unwrap_or_default();
                        format!("Error: {subtype} {}", errors.join("; "))
                    }
                };
                self.raw(format!("{text}\n").as_bytes());
            }
        }
    }

    pub fn line(&mut self, value: &Value) {
        let mut bytes = serde_json::to_vec(value).expect("events serialise");
        bytes.push(b'\n');
        self.raw(&bytes);
    }

    /// Writes and flushes; a reader that went away ends the process like a broken
    /// pipe ends the real CLI.
    pub fn raw(&mut self, bytes: &[u8]) {
        let mut stdout = std::io::stdout().lock();
        if stdout
            .write_all(bytes)
            .and_then(|_| stdout.flush())
            .is_err()
        {
            std::process::exit(1);
        }
    }
}
