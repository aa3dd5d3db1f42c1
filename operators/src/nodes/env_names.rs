//! `envs: "train"` or `envs: ["sokoban", "frozen_lake"]`: one or several env sets.

use std::fmt;

use roll_flow_engine::Reference;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;

/// The env sets a rollout or eval node plays, by their `envs:` names.
#[derive(Clone, Debug, PartialEq)]
pub struct EnvNames(pub Vec<String>);

impl EnvNames {
    /// The references of a node that plays these env sets (its `envs:`) with `policy` (its
    /// `policy:`): `Rollout` and `Eval`.
    pub fn played_by(&self, policy: &str) -> Vec<Reference> {
        let mut refs: Vec<Reference> = self
            .0
            .iter()
            .map(|name| Reference::Env {
                field: "envs",
                name: name.clone(),
            })
            .collect();
        refs.push(Reference::Model {
            field: "policy",
            name: policy.to_string(),
        });
        refs
    }
}

impl<'de> Deserialize<'de> for EnvNames {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NamesVisitor;

        impl<'de> Visitor<'de> for NamesVisitor {
            type Value = EnvNames;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an env set name like \"train\", or a list of names")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<EnvNames, E> {
                Ok(EnvNames(vec![v.to_string()]))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<EnvNames, A::Error> {
                let mut names = Vec::new();
                while let Some(name) = seq.next_element::<String>()? {
                    names.push(name);
                }
                if names.is_empty() {
                    return Err(de::Error::custom(
                        "the list of env sets is empty; name at least one",
                    ));
                }
                Ok(EnvNames(names))
            }
        }

        deserializer.deserialize_any(NamesVisitor)
    }
}
