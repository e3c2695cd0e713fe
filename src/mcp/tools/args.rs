//! Tool arguments: an object whose keys are all known, read with types, and
//! every refusal naming the argument.

use serde_json::{Map, Value};

use super::ToolError;

pub struct Args {
    map: Map<String, Value>,
}

impl Args {
    /// Accepts a missing or `{}`-shaped argument object with only `allowed` keys.
    pub fn parse(value: Option<Value>, allowed: &[&str]) -> Result<Self, ToolError> {
        let map = match value {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(map)) => map,
            Some(_) => return Err(ToolError::invalid("arguments", "must be an object")),
        };
        if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(ToolError::invalid(
                unknown,
                if allowed.is_empty() {
                    "is not an argument of this tool (it takes none)".to_owned()
                } else {
                    format!(
                        "is not an argument of this tool (expected {})",
                        allowed.join(", ")
                    )
                },
            ));
        }
        Ok(Self { map })
    }

    fn get(&self, key: &str) -> Option<&Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub fn string(&self, key: &str) -> Result<Option<String>, ToolError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(ToolError::invalid(key, "must be a string")),
        }
    }

    pub fn required_string(&self, key: &str) -> Result<String, ToolError> {
        self.string(key)?
            .filter(|s| !s.is_empty())
            .ok_or_else(|| ToolError::invalid(key, "is required"))
    }

    pub fn integer(&self, key: &str) -> Result<Option<i64>, ToolError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| ToolError::invalid(key, "must be a whole number")),
        }
    }

    pub fn boolean(&self, key: &str) -> Result<Option<bool>, ToolError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(ToolError::invalid(key, "must be true or false")),
        }
    }

    /// Any JSON value, as given.
    pub fn json(&self, key: &str) -> Option<Value> {
        self.get(key).cloned()
    }

    /// A key that must be present and may be `null` (e.g. "clear the default").
    pub fn nullable_integer(&self, key: &str) -> Result<Option<i64>, ToolError> {
        match self.map.get(key) {
            None => Err(ToolError::invalid(key, "is required (a number or null)")),
            Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| ToolError::invalid(key, "must be a whole number or null")),
        }
    }
}
