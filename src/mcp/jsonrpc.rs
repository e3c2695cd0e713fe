//! JSON-RPC 2.0 framing: what a POST may carry and what we answer.

use serde::Deserialize;
use serde_json::{Value, json};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

/// One incoming message: a request (method + id), a notification (method,
/// no id) or a response to something we asked (result/error, no method).
#[derive(Debug, Deserialize)]
pub struct Incoming {
    pub jsonrpc: Option<String>,
    pub id: Option<Value>,
    pub method: Option<String>,
    #[serde(default)]
    pub params: Option<Value>,
    pub result: Option<Value>,
    pub error: Option<Value>,
}

impl Incoming {
    pub fn is_request(&self) -> bool {
        self.method.is_some() && self.id.is_some()
    }

    pub fn is_notification(&self) -> bool {
        self.method.is_some() && self.id.is_none()
    }

    /// A valid JSON-RPC 2.0 envelope: version "2.0" and either a method or a
    /// result/error; an id, when present, is a string or a number.
    pub fn is_well_formed(&self) -> bool {
        let id_ok = match &self.id {
            None => true,
            Some(v) => v.is_string() || v.is_number(),
        };
        self.jsonrpc.as_deref() == Some("2.0")
            && id_ok
            && (self.method.is_some() || self.result.is_some() || self.error.is_some())
    }
}

pub fn success(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub fn error(id: Option<&Value>, code: i64, message: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id.cloned().unwrap_or(Value::Null),
        "error": {"code": code, "message": message}
    })
}

pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Incoming {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn kinds_of_message() {
        let req = parse(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        assert!(req.is_request() && req.is_well_formed());
        let note = parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(note.is_notification() && note.is_well_formed());
        let reply = parse(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#);
        assert!(!reply.is_request() && reply.is_well_formed());
        assert!(!parse(r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#).is_well_formed());
        assert!(!parse(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#).is_well_formed());
    }
}
