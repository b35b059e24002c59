//! Agent runners.

pub mod claude_code;
