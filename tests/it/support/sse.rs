//! An open MCP notification stream (`GET /mcp/{slug}`), read SSE event by
//! event: what the multi-process tests (`cluster`, `cluster_faults`) listen on.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::mcp::Mcp;

/// An open SSE stream, read event by event (nothing read is ever dropped).
pub struct Stream {
    pub response: reqwest::Response,
    buffered: String,
    pub mcp: Mcp,
    pub session: String,
}

impl Stream {
    /// A new session on `mcp` (`initialize`) with its stream open.
    pub async fn open(mcp: Mcp) -> Stream {
        let session = mcp.initialize().await;
        let response = mcp.open_stream(&session).await;
        Stream {
            response,
            buffered: String::new(),
            mcp,
            session,
        }
    }

    /// The stream of a session already initialized, opened now.
    pub async fn attach(mcp: Mcp, session: String) -> Stream {
        let response = mcp.open_stream(&session).await;
        Stream {
            response,
            buffered: String::new(),
            mcp,
            session,
        }
    }

    /// The next JSON message, or `None` once `within` passes (or it ends).
    pub async fn next(&mut self, within: Duration) -> Option<Value> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(end) = self.buffered.find("\n\n") {
                let event: String = self.buffered.drain(..end + 2).collect();
                if let Some(v) = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .find_map(|d| serde_json::from_str::<Value>(d.trim_start()).ok())
                {
                    return Some(v);
                }
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.response.chunk()).await {
                Ok(Ok(Some(chunk))) => self.buffered.push_str(&String::from_utf8_lossy(&chunk)),
                _ => return None,
            }
        }
    }

    /// Every doorbell until `quiet` passes with nothing new.
    pub async fn drain(&mut self, quiet: Duration) -> Vec<Value> {
        let mut got = Vec::new();
        while let Some(v) = self.next(quiet).await {
            got.push(v);
        }
        got
    }

    /// Whether the stream ends within `within`.
    pub async fn ends_within(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.response.chunk()).await {
                Ok(Ok(Some(_))) => continue,
                Ok(Ok(None)) | Ok(Err(_)) => return true,
                Err(_) => return false,
            }
        }
    }
}

/// The todo a doorbell is about.
pub fn todo_id(v: &Value) -> Option<&str> {
    v["params"]["meta"]["todo_id"].as_str()
}

/// Whether a doorbell is a digest.
pub fn is_digest(v: &Value) -> bool {
    v["params"]["meta"]["kind"] == "digest"
}
