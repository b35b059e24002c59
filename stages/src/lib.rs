//! Stage kinds.
