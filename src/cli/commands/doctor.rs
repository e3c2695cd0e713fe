//! `switchboard doctor [REF]`: is everything in place for a doorbell to be
//! heard, and if not, what to do about it.
//!
//! It checks, in order, the CLI's login, the server (health, readiness,
//! version), and — given an endpoint — its state, presence, sessions (with
//! why any is deaf), waiting work and last contact. Every finding says what
//! to do. Exit 0 when nothing is wrong, 1 when something is.

use clap::Args;
use serde::Serialize;
use serde_json::Value;

use crate::cli::args::ClientArgs;
use crate::cli::client::ApiClient;
use crate::cli::output::text;
use crate::domain::server_key::default_server_key;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// An endpoint to examine (slug or id).
    pub reference: Option<String>,
}

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Level {
    Ok,
    /// Worth knowing; not a fault (e.g. clocked out on purpose).
    Note,
    Problem,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Finding {
    pub check: &'static str,
    pub level: Level,
    pub detail: String,
    /// What to do, when something is to be done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Finding {
    fn ok(check: &'static str, detail: impl Into<String>) -> Self {
        Self {
            check,
            level: Level::Ok,
            detail: detail.into(),
            fix: None,
        }
    }
    fn note(check: &'static str, detail: impl Into<String>) -> Self {
        Self {
            check,
            level: Level::Note,
            detail: detail.into(),
            fix: None,
        }
    }
    fn problem(check: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            check,
            level: Level::Problem,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// The report, as `--json` prints it.
#[derive(Debug, Serialize)]
struct Report<'a> {
    healthy: bool,
    findings: &'a [Finding],
}

/// Found problems: the exit code is 1, and the report already said why.
#[derive(Debug)]
pub(crate) struct ProblemsFound(pub usize);

impl std::fmt::Display for ProblemsFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "doctor found {} problem(s)", self.0)
    }
}

impl std::error::Error for ProblemsFound {}

pub(crate) async fn run(args: DoctorArgs) -> anyhow::Result<()> {
    let findings = examine(&args).await;
    let problems = findings
        .iter()
        .filter(|f| f.level == Level::Problem)
        .count();
    if args.client.json {
        let report = Report {
            healthy: problems == 0,
            findings: &findings,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for f in &findings {
            let mark = match f.level {
                Level::Ok => "ok  ",
                Level::Note => "note",
                Level::Problem => "FAIL",
            };
            println!("{mark}  {:<10} {}", f.check, f.detail);
            if let Some(fix) = &f.fix {
                println!("      {:<10} → {fix}", "");
            }
        }
    }
    if problems > 0 {
        return Err(ProblemsFound(problems).into());
    }
    Ok(())
}

async fn examine(args: &DoctorArgs) -> Vec<Finding> {
    let mut findings = Vec::new();
    let client = match args.client.connect() {
        Ok(client) => {
            findings.push(Finding::ok("login", format!("using {}", client.base_url())));
            client
        }
        Err(e) => {
            findings.push(Finding::problem(
                "login",
                format!("{e:#}"),
                "run `switchboard login URL` with the first start's sbh_ token (its banner, or the \
                 <database>.bootstrap-token file whose path the server logged)",
            ));
            return findings;
        }
    };
    if !check_server(&client, &mut findings).await {
        return findings;
    }
    match client.get(&["me"], &[]).await {
        Ok(me) => {
            let me = me.json().unwrap_or_default();
            findings.push(Finding::ok(
                "token",
                format!("signed in as {}", text(&me, "name")),
            ));
        }
        Err(e) => {
            findings.push(Finding::problem(
                "token",
                format!("{e:#}"),
                "the token is revoked, expired or wrong: `switchboard login URL` with a live one",
            ));
            return findings;
        }
    }
    if let Some(reference) = &args.reference {
        match client.get(&["endpoints", reference], &[]).await {
            Ok(endpoint) => {
                let endpoint = endpoint.json().unwrap_or_default();
                findings.extend(examine_endpoint(&endpoint));
            }
            Err(e) => findings.push(Finding::problem(
                "endpoint",
                format!("{reference}: {e:#}"),
                "check the slug with `switchboard endpoint list`",
            )),
        }
    }
    findings
}

/// Health, readiness and version; false when the server cannot be used.
async fn check_server(client: &ApiClient, findings: &mut Vec<Finding>) -> bool {
    match client.readiness().await {
        Ok(ready) => {
            let ready = ready.json().unwrap_or_default();
            let version = text(&ready, "version");
            findings.push(Finding::ok(
                "server",
                format!(
                    "ready (version {version}, instance {}, bus {})",
                    text(&ready, "instance"),
                    text(&ready, "bus")
                ),
            ));
            let ours = env!("CARGO_PKG_VERSION");
            if version != ours && version != "-" {
                findings.push(Finding::note(
                    "version",
                    format!("the server runs {version}, this CLI is {ours}"),
                ));
            }
            true
        }
        Err(e) => {
            findings.push(Finding::problem(
                "server",
                format!("not ready: {e:#}"),
                "start it with `switchboard serve`, or check its database (the server's log says why)",
            ));
            false
        }
    }
}

/// What an endpoint's view says about whether its doorbells are heard.
pub(crate) fn examine_endpoint(e: &Value) -> Vec<Finding> {
    let mut findings = Vec::new();
    let slug = text(e, "slug");
    let key = e
        .get("server_name")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| default_server_key(&text(e, "agent")));
    if text(e, "state") != "active" {
        findings.push(Finding::problem(
            "endpoint",
            format!("{slug} is revoked"),
            format!(
                "vend a new one: `switchboard endpoint vend {}`",
                text(e, "agent")
            ),
        ));
        return findings;
    }
    findings.push(Finding::ok(
        "endpoint",
        format!("{slug} (agent {}) is active", text(e, "agent")),
    ));
    let presence = &e["presence"];
    let out = text(presence, "presence") == "out";
    if out {
        let until = presence["until"].as_str().unwrap_or("further notice");
        findings.push(Finding::note(
            "presence",
            format!(
                "out ({}) until {until}: doorbells are held, pulls still work",
                text(presence, "source")
            ),
        ));
    } else {
        findings.push(Finding::ok(
            "presence",
            format!("in ({})", text(presence, "source")),
        ));
    }
    let sessions = &e["sessions"];
    let attached = sessions["attached"].as_i64().unwrap_or(0);
    let streaming = sessions["streaming"].as_i64().unwrap_or(0);
    let rows = sessions["list"].as_array().cloned().unwrap_or_default();
    let launch = format!("claude --dangerously-load-development-channels server:{key}");
    if attached == 0 {
        findings.push(Finding::problem(
            "sessions",
            "no MCP session is attached on the instance that answered",
            format!("start the agent's client (Claude Code: `{launch}`, needs ≥ 2.1.80)"),
        ));
    } else if streaming == 0 {
        findings.push(Finding::problem(
            "sessions",
            format!("{attached} attached, none has its notification stream open"),
            "the client is not listening for doorbells; restart it (Claude Code opens the stream itself)",
        ));
    } else {
        let clients: Vec<String> = rows
            .iter()
            .map(|r| {
                let name = r["client_name"].as_str().unwrap_or("unknown client");
                match r["client_version"].as_str() {
                    Some(version) => format!("{name} {version}"),
                    None => name.to_owned(),
                }
            })
            .collect();
        findings.push(Finding::ok(
            "sessions",
            format!(
                "{attached} attached, {streaming} streaming ({})",
                clients.join(", ")
            ),
        ));
    }
    for row in &rows {
        let client = match (row["client_name"].as_str(), row["client_version"].as_str()) {
            (Some(name), Some(version)) => format!("{name} {version}"),
            (Some(name), None) => name.to_owned(),
            _ => "unknown client".to_owned(),
        };
        let id = text(row, "id_prefix");
        match row["deaf_reason"].as_str() {
            Some("unanswered") => findings.push(Finding::problem(
                "doorbells",
                format!(
                    "session {id}… ({client}) was rung {} times with no request since (last {}s ago)",
                    row["unanswered_doorbells"].as_i64().unwrap_or(0),
                    row["unanswered_since_seconds"].as_i64().unwrap_or(0),
                ),
                format!(
                    "its client drops the doorbells: start Claude Code with `{launch}` (needs ≥ 2.1.80; \
                     channels are not available on Bedrock or Vertex, and Team/Enterprise orgs must enable them)"
                ),
            )),
            Some(reason) => findings.push(Finding::problem(
                "doorbells",
                format!("session {id}… ({client}) is deaf: {reason}"),
                "its client is not reading its stream; restart it",
            )),
            None => {}
        }
    }
    let todos = &e["todos"];
    let pending = todos["pending"].as_i64().unwrap_or(0);
    let claimed = todos["claimed"].as_i64().unwrap_or(0);
    let dead = todos["dead_letter"].as_i64().unwrap_or(0);
    findings.push(Finding::ok(
        "todos",
        format!(
            "{pending} pending{}, {claimed} claimed, {dead} dead-lettered",
            if out && pending > 0 { " (held)" } else { "" }
        ),
    ));
    let liveness = &e["liveness"];
    match text(liveness, "condition").as_str() {
        "stale" => findings.push(Finding::problem(
            "liveness",
            format!(
                "stale: last seen {}, expected every {}s",
                text(liveness, "last_seen_at"),
                liveness["expected_interval_seconds"].as_i64().unwrap_or(0)
            ),
            "the agent stopped calling; check that it is running",
        )),
        "unknown" => findings.push(Finding::note(
            "liveness",
            "never seen: no authenticated request yet",
        )),
        condition => findings.push(Finding::ok(
            "liveness",
            format!("{condition}, last seen {}", text(liveness, "last_seen_at")),
        )),
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn endpoint(deaf_reason: Option<&str>) -> Value {
        json!({
            "slug": "reviewer-k3x9", "agent": "reviewer", "state": "active",
            "presence": {"presence": "in", "source": "default", "until": null},
            "sessions": {"attached": 1, "streaming": 1, "deaf": i64::from(deaf_reason.is_some()),
                "list": [{"id_prefix": "abcd1234", "client_name": "claude-code",
                          "streaming": true, "deaf_reason": deaf_reason,
                          "unanswered_doorbells": 3, "unanswered_since_seconds": 200}]},
            "todos": {"pending": 2, "claimed": 0, "dead_letter": 0},
            "liveness": {"condition": "idle", "last_seen_at": "2026-12-01T09:00:00Z",
                         "expected_interval_seconds": 1800}
        })
    }

    #[test]
    fn a_hearing_endpoint_has_no_problem() {
        let findings = examine_endpoint(&endpoint(None));
        assert!(
            findings.iter().all(|f| f.level != Level::Problem),
            "{findings:#?}"
        );
    }

    #[test]
    fn unanswered_doorbells_point_at_the_channels_flag() {
        let findings = examine_endpoint(&endpoint(Some("unanswered")));
        let problem = findings
            .iter()
            .find(|f| f.level == Level::Problem)
            .expect("a problem");
        assert!(
            problem.detail.contains("rung 3 times"),
            "{}",
            problem.detail
        );
        let fix = problem.fix.as_deref().unwrap();
        assert!(
            fix.contains("--dangerously-load-development-channels server:switchboard-reviewer"),
            "{fix}"
        );
    }
}
