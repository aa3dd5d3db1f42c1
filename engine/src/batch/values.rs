//! Typed column storage.

use serde::{Deserialize, Serialize};

/// The values of one column: a flat vector of one element type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Values {
    F32(Vec<f32>),
    I64(Vec<i64>),
    U64(Vec<u64>),
    Bool(Vec<bool>),
    Str(Vec<String>),
}

impl Values {
    pub fn len(&self) -> usize {
        match self {
            Values::F32(v) => v.len(),
            Values::I64(v) => v.len(),
            Values::U64(v) => v.len(),
            Values::Bool(v) => v.len(),
            Values::Str(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type's name, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Values::F32(_) => "f32",
            Values::I64(_) => "i64",
            Values::U64(_) => "u64",
            Values::Bool(_) => "bool",
            Values::Str(_) => "string",
        }
    }

    /// An empty vector of the same element type.
    pub fn empty_like(&self) -> Values {
        match self {
            Values::F32(_) => Values::F32(Vec::new()),
            Values::I64(_) => Values::I64(Vec::new()),
            Values::U64(_) => Values::U64(Vec::new()),
            Values::Bool(_) => Values::Bool(Vec::new()),
            Values::Str(_) => Values::Str(Vec::new()),
        }
    }

    /// Appends `other[range]`; returns false when the element types differ.
    pub fn extend_from(&mut self, other: &Values, range: std::ops::Range<usize>) -> bool {
        match (self, other) {
            (Values::F32(a), Values::F32(b)) => a.extend_from_slice(&b[range]),
            (Values::I64(a), Values::I64(b)) => a.extend_from_slice(&b[range]),
            (Values::U64(a), Values::U64(b)) => a.extend_from_slice(&b[range]),
            (Values::Bool(a), Values::Bool(b)) => a.extend_from_slice(&b[range]),
            (Values::Str(a), Values::Str(b)) => a.extend_from_slice(&b[range]),
            _ => return false,
        }
        true
    }
}

macro_rules! values_from {
    ($($t:ty => $variant:ident),*) => {$(
        impl From<Vec<$t>> for Values {
            fn from(v: Vec<$t>) -> Self {
                Values::$variant(v)
            }
        }
    )*};
}

values_from!(f32 => F32, i64 => I64, u64 => U64, bool => Bool, String => Str);
