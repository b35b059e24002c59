//! The HTML report of a run.
