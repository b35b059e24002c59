//! The options of a run or a resume: what the command line gives, checked, over
//! what the run recorded, over the pipeline's.

use crate::pipeline::{PipelineFile, RunOverrides};
use crate::store::RunOptions;

/// What the command line gives `run` and `resume` alike.
#[derive(Debug, Clone, Default)]
pub struct GivenOptions {
    pub concurrency: Option<u32>,
    pub only: Vec<String>,
    pub fail_fast: bool,
    pub allow_dirty: bool,
    pub overrides: RunOverrides,
    /// `--run-budget-usd`: the whole run's budget, over the pipeline's.
    pub run_budget_usd: Option<f64>,
}

/// A flag whose value no run can use.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{flag}: {problem}")]
pub struct OptionsError {
    pub flag: &'static str,
    pub problem: String,
}

impl GivenOptions {
    /// Refuse values no run can use, naming the flag. Checked before anything is
    /// opened or detected, in the order the flags are documented.
    pub fn check(&self) -> Result<(), OptionsError> {
        let positive = |flag, x: Option<f64>| match x {
            Some(x) if !(x.is_finite() && x > 0.0) => Err(OptionsError {
                flag,
                problem: format!("expected a positive amount, got {x}"),
            }),
            _ => Ok(()),
        };
        let at_least_one = |flag, x: Option<u32>| match x {
            Some(0) => Err(OptionsError {
                flag,
                problem: "expected at least 1".into(),
            }),
            _ => Ok(()),
        };
        positive("--max-budget-usd", self.overrides.max_budget_usd)?;
        at_least_one("--max-turns", self.overrides.max_turns)?;
        positive("--run-budget-usd", self.run_budget_usd)?;
        at_least_one("--concurrency", self.concurrency)
    }
}

/// The options a run starts with (`recorded` is `None`) or a resume continues
/// with: the command line's over the recorded ones over the pipeline's. One
/// function for both, so that run and resume never disagree on a flag; the
/// overrides are merged field by field.
pub fn resolve_options(
    given: &GivenOptions,
    recorded: Option<&RunOptions>,
    file: &PipelineFile,
) -> RunOptions {
    let before = recorded.map(|r| r.overrides.clone()).unwrap_or_default();
    let o = &given.overrides;
    let overrides = RunOverrides {
        max_turns: o.max_turns.or(before.max_turns),
        max_budget_usd: o.max_budget_usd.or(before.max_budget_usd),
        timeout: o.timeout.or(before.timeout),
        model: o.model.clone().or(before.model),
    };
    RunOptions {
        concurrency: given
            .concurrency
            .or(recorded.map(|r| r.concurrency))
            .or(file.concurrency)
            .unwrap_or(crate::pipeline::resolve::DEFAULT_CONCURRENCY)
            .max(1),
        only: match recorded {
            Some(r) => r.only.clone(),
            None => given.only.clone(),
        },
        fail_fast: given.fail_fast || recorded.is_some_and(|r| r.fail_fast),
        allow_dirty: given.allow_dirty || recorded.is_some_and(|r| r.allow_dirty),
        overrides,
        budget_usd: given.run_budget_usd.or(file.budget.max_budget_usd),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::DurationSpec;

    #[test]
    fn each_flag_is_refused_by_name() {
        let cases: [(GivenOptions, &str); 4] = [
            (
                GivenOptions {
                    overrides: RunOverrides {
                        max_budget_usd: Some(f64::NAN),
                        ..Default::default()
                    },
                    ..Default::default()
                },
                "--max-budget-usd: expected a positive amount, got NaN",
            ),
            (
                GivenOptions {
                    overrides: RunOverrides {
                        max_turns: Some(0),
                        ..Default::default()
                    },
                    ..Default::default()
                },
                "--max-turns: expected at least 1",
            ),
            (
                GivenOptions {
                    run_budget_usd: Some(-1.0),
                    ..Default::default()
                },
                "--run-budget-usd: expected a positive amount, got -1",
            ),
            (
                GivenOptions {
                    concurrency: Some(0),
                    ..Default::default()
                },
                "--concurrency: expected at least 1",
            ),
        ];
        for (given, message) in cases {
            assert_eq!(given.check().unwrap_err().to_string(), message);
        }
        assert_eq!(GivenOptions::default().check(), Ok(()));
    }

    #[test]
    fn a_resume_keeps_recorded_overrides_it_does_not_replace() {
        let file: PipelineFile =
            serde_yaml::from_str("version: 1\nname: p\nstages: []\n").expect("pipeline");
        let recorded = RunOptions {
            concurrency: 3,
            overrides: RunOverrides {
                max_turns: Some(7),
                timeout: Some(DurationSpec::parse("5m").expect("duration")),
                ..Default::default()
            },
            ..Default::default()
        };
        let given = GivenOptions {
            overrides: RunOverrides {
                model: Some("opus".into()),
                max_turns: Some(9),
                ..Default::default()
            },
            ..Default::default()
        };
        let options = resolve_options(&given, Some(&recorded), &file);
        assert_eq!(options.concurrency, 3);
        assert_eq!(options.overrides.max_turns, Some(9));
        assert_eq!(options.overrides.model.as_deref(), Some("opus"));
        assert_eq!(options.overrides.timeout, recorded.overrides.timeout);
        // The record keeps the shape it had as a map: only the fields given.
        let json = serde_json::to_value(&options.overrides).expect("serialise");
        assert_eq!(
            json.as_object().map(serde_json::Map::len),
            Some(3),
            "{json}"
        );
    }
}
