//! Tool arguments: an object whose keys are all known, deserialised into a
//! typed struct, every refusal naming the argument.
//!
//! serde does the reading; this module keeps the refusals what they always
//! were (`"<argument>: <why>"`):
//!
//! - a key the struct does not declare is refused first, whatever else is
//!   wrong, listing the arguments the tool takes (see `ToolArgs::LISTED`);
//! - the declared fields are then read in declaration order, an absent one
//!   read as `null` (so a missing required `id` is refused in its turn, not
//!   after everything else), unless the struct says `null` means something;
//! - a wrong type says what was expected, in the words of [`de`].

use serde::de::value::MapDeserializer;
use serde::de::{DeserializeOwned, Deserializer, Visitor};
use serde_json::Value;

use super::ToolError;

/// A tool's argument struct.
///
/// Implementors derive `Deserialize` with `#[serde(deny_unknown_fields)]`
/// and read every field through a [`de`] function (or `Option<Value>`), so
/// that a type error carries today's message.
pub(super) trait ToolArgs: DeserializeOwned {
    /// Whether an absent argument reads as `null`. `false` for a struct with
    /// an argument that must be given even when it is `null` ("clear the
    /// default"); serde then reports its absence, see [`missing_message`].
    const ABSENT_IS_NULL: bool = true;

    /// How a refusal of an unknown argument lists the arguments, when not
    /// in declaration order (which is the order they are read and checked
    /// in). A permutation of the fields.
    const LISTED: Option<&'static [&'static str]> = None;
}

/// The arguments of a tool: missing or `null` is `{}`; anything but an
/// object is refused.
pub(super) fn parse<T: ToolArgs>(value: Option<Value>) -> Result<T, ToolError> {
    let map = match value {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(ToolError::invalid("arguments", "must be an object")),
    };
    let fields = fields_of::<T>();
    let listed = T::LISTED.unwrap_or(fields);
    if let Some(unknown) = map.keys().find(|k| !fields.contains(&k.as_str())) {
        return Err(ToolError::invalid(unknown, unknown_message(listed)));
    }
    let mut map = map;
    // Declaration order, so the first bad argument is the first declared.
    let entries: Vec<(String, Value)> = fields
        .iter()
        .filter_map(|&field| match map.remove(field) {
            Some(value) => Some((field.to_owned(), value)),
            None if T::ABSENT_IS_NULL => Some((field.to_owned(), Value::Null)),
            None => None,
        })
        .collect();
    let de = MapDeserializer::<_, serde_json::Error>::new(entries.into_iter());
    serde_path_to_error::deserialize(de).map_err(|err| {
        let path = err.path().to_string();
        let message = err.into_inner().to_string();
        if let Some(field) = backticked_after(&message, "missing field `") {
            return ToolError::invalid(&field, missing_message(&field));
        }
        if let Some(field) = backticked_after(&message, "unknown field `") {
            return ToolError::invalid(&field, unknown_message(listed));
        }
        let field = path.trim_start_matches('.');
        ToolError::invalid(if field.is_empty() { "arguments" } else { field }, message)
    })
}

fn unknown_message(fields: &[&str]) -> String {
    if fields.is_empty() {
        "is not an argument of this tool (it takes none)".to_owned()
    } else {
        format!(
            "is not an argument of this tool (expected {})",
            fields.join(", ")
        )
    }
}

/// Only an argument whose `null` means something can be missing (the others
/// read absent as `null`).
fn missing_message(field: &str) -> &'static str {
    match field {
        "default_lease_ttl_seconds" => "is required (a number or null)",
        _ => "is required",
    }
}

/// serde says "missing field `id`": the field is `id`.
fn backticked_after(message: &str, prefix: &str) -> Option<String> {
    let rest = message.strip_prefix(prefix)?;
    Some(rest.split('`').next()?.to_owned())
}

/// The serialised names of a struct's fields, in declaration order: what
/// `#[derive(Deserialize)]` hands to `deserialize_struct`.
pub(super) fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Grab<'a>(&'a mut &'static [&'static str]);

    impl<'de> Deserializer<'de> for Grab<'_> {
        type Error = serde::de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(serde::de::Error::custom("not a struct"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(serde::de::Error::custom("fields taken"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }

    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Grab(&mut fields));
    fields
}

/// Field readers with today's refusals. `null` is "not given" except in
/// [`nullable_integer`].
pub(super) mod de {
    use serde::de::{Deserialize, Deserializer, Error};
    use serde_json::Value;

    pub(crate) fn string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s)),
            _ => Err(D::Error::custom("must be a string")),
        }
    }

    /// A string that must be given and not empty.
    pub(crate) fn required_string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        string(d)?
            .filter(|s| !s.is_empty())
            .ok_or_else(|| D::Error::custom("is required"))
    }

    pub(crate) fn integer<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(None),
            v => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| D::Error::custom("must be a whole number")),
        }
    }

    pub(crate) fn boolean<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(None),
            Value::Bool(b) => Ok(Some(b)),
            _ => Err(D::Error::custom("must be true or false")),
        }
    }

    /// Must be given (see `ToolArgs::ABSENT_IS_NULL`); `null` is a value.
    pub(crate) fn nullable_integer<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<i64>, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(None),
            v => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| D::Error::custom("must be a whole number or null")),
        }
    }
}
