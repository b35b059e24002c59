//! Agent runners: how specbridge detects, invokes and reads an agent CLI.

pub mod claude_code;
