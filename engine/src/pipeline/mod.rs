//! The pipeline file: model, loading with source locations, validation, defaults.

pub mod checked_cache;
mod forbidden;
pub mod inside;
pub mod load;
pub mod locate;
pub mod model;
pub mod resolve;
pub mod schema;
mod schema_errors;
pub mod suggest;
pub mod units;
pub mod validate;
mod yaml_events;
mod yaml_json;

pub use load::{load, LoadedPipeline};
pub use model::*;
pub use resolve::{ResolvedRunner, RunOverrides};
pub use schema::pipeline_schema;
pub use units::{ByteSize, DurationSpec};
pub use validate::{load_and_validate, validate, ValidPipeline};
