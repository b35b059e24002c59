//! The pipeline file: model, loading with source locations, validation, defaults.

pub mod model;
pub mod resolve;
pub mod units;

pub use model::*;
pub use resolve::{ResolvedRunner, RunOverrides};
pub use units::{ByteSize, DurationSpec};
