//! EnvConfig: RON as users write it, clear errors, and the custom-env registry.

use serde::Deserialize;

use super::{ron_options, EnvConfig};
use crate::action::parse_actions;
use crate::env::{Env, EnvInfo, Reset, StepResult};
use crate::error::EnvError;
use crate::registry::{self, register_env};
use crate::render::frame::Frame;
use crate::sokoban::render::Vocabulary;
use roll_flow_engine::EnvSet;

#[test]
fn specs_parse_with_defaults() {
    let EnvConfig::FrozenLake(lake) = EnvConfig::parse("FrozenLake(size: 5)").unwrap() else {
        panic!("variant");
    };
    assert_eq!(
        (lake.size, lake.p, lake.slippery, lake.max_actions),
        (5, 0.8, false, 10)
    );
    let spec = "Sokoban(dim_room: (8, 8), num_boxes: 2, vocabulary: Letters)";
    let EnvConfig::Sokoban(sokoban) = EnvConfig::parse(spec).unwrap() else {
        panic!("variant");
    };
    assert_eq!((sokoban.dim_room, sokoban.num_boxes), ((8, 8), 2));
    assert_eq!(
        (sokoban.search_depth, sokoban.vocabulary),
        (30, Vocabulary::Letters)
    );
    for bare in ["Bandit()", "Math()", "FrozenLake()", "Sokoban()"] {
        let config = EnvConfig::parse(bare).unwrap_or_else(|e| panic!("{bare}: {e}"));
        assert!(bare.starts_with(config.name()));
        config.build().unwrap();
    }
}

#[test]
fn env_set_entry_parses_as_in_the_design() {
    let text = "(env: FrozenLake(size: 4, p: 0.8, slippery: false), groups: 16, group_size: 8, \
                max_turns: 8)";
    let set: EnvSet<EnvConfig> = ron_options().from_str(text).unwrap();
    assert_eq!(
        (set.groups, set.group_size, set.max_turns, set.seed),
        (16, 8, Some(8), None)
    );
    assert_eq!(set.env.name(), "FrozenLake");
}

#[test]
fn mistakes_get_clear_errors() {
    let typo = EnvConfig::parse("FrozenLake(sise: 4)")
        .unwrap_err()
        .to_string();
    assert!(typo.contains("sise"), "{typo}");
    let variant = EnvConfig::parse("FrozenLak(size: 4)")
        .unwrap_err()
        .to_string();
    assert!(variant.contains("FrozenLak"), "{variant}");
    let syntax = EnvConfig::parse("FrozenLake(size: 4").unwrap_err();
    assert!(matches!(syntax, EnvError::Spec(_)));
    let size = EnvConfig::parse("FrozenLake(size: 0)")
        .unwrap()
        .build()
        .err()
        .unwrap();
    assert!(size.to_string().contains("`size`"), "{size}");
    let boxes = EnvConfig::parse("Sokoban(dim_room: (4, 4), num_boxes: 5)").unwrap();
    let message = boxes.build().err().unwrap().to_string();
    assert!(message.contains("do not fit"), "{message}");
}

/// A real (tiny) custom env: walk right along a corridor to its end.
struct Corridor {
    length: usize,
    at: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CorridorConfig {
    length: usize,
}

impl Env for Corridor {
    fn name(&self) -> &'static str {
        "Corridor"
    }
    fn reset(&mut self, _seed: u64) -> Result<Reset, EnvError> {
        self.at = 0;
        Ok(Reset {
            observation: self.observation(),
            instruction: "Go Right.".into(),
        })
    }
    fn step(&mut self, text: &str) -> Result<StepResult, EnvError> {
        let valid = parse_actions(text, &["Left", "Right"], 1).ok();
        if let Some(action) = valid.as_ref().map(|a| a[0]) {
            self.at = if action == 1 {
                self.at + 1
            } else {
                self.at.saturating_sub(1)
            };
        }
        let done = self.at + 1 >= self.length;
        Ok(StepResult {
            observation: self.observation(),
            reward: if done { 1.0 } else { 0.0 },
            terminated: done,
            truncated: false,
            info: EnvInfo {
                success: done,
                action_is_valid: valid.is_some(),
                ..Default::default()
            },
        })
    }
    fn observation(&self) -> String {
        (0..self.length)
            .map(|i| if i == self.at { 'P' } else { '_' })
            .collect()
    }
    fn render_frame(&self) -> Result<Frame, EnvError> {
        Ok(Frame::empty())
    }
    fn default_max_turns(&self) -> usize {
        self.length
    }
}

fn corridor(params: &ron::Value) -> Result<Box<dyn Env>, EnvError> {
    let config: CorridorConfig = registry::params("Corridor", params)?;
    Ok(Box::new(Corridor {
        length: config.length,
        at: 0,
    }))
}

#[test]
fn custom_env_is_one_registration_away() {
    register_env("Corridor", corridor);
    assert!(registry::registered_names().contains(&"Corridor".to_string()));
    let config = EnvConfig::parse("Custom(name: \"Corridor\", params: (length: 3))").unwrap();
    assert_eq!(config.name(), "Corridor");
    let mut env = config.build().unwrap();
    assert_eq!(env.reset(0).unwrap().observation, "P__");
    assert_eq!(
        env.step("<answer>Right</answer>").unwrap().observation,
        "_P_"
    );
    assert!(env.step("<answer>right</answer>").unwrap().terminated);

    let bad = EnvConfig::parse("Custom(name: \"Corridor\", params: (len: 3))").unwrap();
    assert!(matches!(bad.build(), Err(EnvError::CustomParams { .. })));
    let unknown = EnvConfig::parse("Custom(name: \"Nope\")").unwrap().build();
    let message = unknown.err().unwrap().to_string();
    assert!(
        message.contains("Nope") && message.contains("Corridor"),
        "{message}"
    );
}

#[test]
fn validation_names_the_offending_env_field_without_building_an_env() {
    let problems = EnvConfig::parse("FrozenLake(size: 1)")
        .unwrap()
        .setting_problems();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].field, vec!["size".to_string()]);
    assert_eq!(
        problems[0].message,
        "FrozenLake: invalid `size`: 1 is not in 2..=64"
    );
    let sokoban = EnvConfig::parse("Sokoban(num_boxes: 9)").unwrap();
    assert_eq!(sokoban.setting_problems()[0].field, vec!["num_boxes"]);
    assert!(EnvConfig::parse("Math(max_turns: 1001)")
        .unwrap()
        .validate()
        .is_err());
    assert!(EnvConfig::parse("Bandit()")
        .unwrap()
        .setting_problems()
        .is_empty());
    // A custom env's parameters are its factory's to check, at run time.
    let custom = EnvConfig::parse("Custom(name: \"NotRegistered\", params: (x: -1))").unwrap();
    assert!(custom.setting_problems().is_empty());
}
