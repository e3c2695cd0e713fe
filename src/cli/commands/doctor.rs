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
use crate::domain::doorbell::RUNNER_CLIENT_NAME;
use crate::domain::server_key::default_server_key;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// An endpoint to examine (slug or id).
    #[arg(conflicts_with = "ring")]
    pub reference: Option<String>,
    /// Examine this endpoint and send it a test doorbell (counted against no
    /// todo): which hearer got it, and whether and how fast it answered.
    #[arg(long, value_name = "REF")]
    pub ring: Option<String>,
    /// How long --ring waits for the answer, in seconds (1–25: within the
    /// CLI's request timeout).
    #[arg(long, default_value_t = 10, requires = "ring",
          value_parser = clap::value_parser!(i64).range(1..=25))]
    pub wait: i64,
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
    /// Worth knowing, with something to do if it matters to you.
    fn note_to_do(check: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            check,
            level: Level::Note,
            detail: detail.into(),
            fix: Some(fix.into()),
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
    if let Some(reference) = args.reference.as_ref().or(args.ring.as_ref()) {
        match client.get(&["endpoints", reference], &[]).await {
            Ok(endpoint) => {
                let endpoint = endpoint.json().unwrap_or_default();
                findings.extend(examine_endpoint(&endpoint));
                if args.ring.is_some() {
                    findings.push(test_ring(&client, &endpoint, args.wait).await);
                }
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

/// Sends the endpoint a test doorbell and says who got it and how soon
/// they answered.
async fn test_ring(client: &ApiClient, endpoint: &Value, wait: i64) -> Finding {
    let slug = text(endpoint, "slug");
    let answer = client
        .post(
            &["endpoints", &slug, "test-ring"],
            &serde_json::json!({ "wait_seconds": wait }),
        )
        .await
        .and_then(|r| r.json());
    match answer {
        Ok(ring) => judge_test_ring(&ring, endpoint, wait),
        Err(e) => Finding::problem(
            "ring",
            format!("the test doorbell could not be sent: {e:#}"),
            "check the server's log",
        ),
    }
}

/// What a test ring's answer means for the operator.
fn judge_test_ring(ring: &Value, endpoint: &Value, wait: i64) -> Finding {
    let key = endpoint["server_name"].as_str().unwrap_or("switchboard");
    let mcp_url = text(endpoint, "mcp_url");
    let who = || {
        let client = ring["client_name"].as_str().unwrap_or("unnamed client");
        format!(
            "{} {}… ({client})",
            text(ring, "hearer"),
            text(ring, "hearer_id")
        )
    };
    match ring["outcome"].as_str() {
        Some("held") => Finding::note(
            "ring",
            "the endpoint is out: the test doorbell is held like every other (clock it in to test)",
        ),
        Some("no_hearer") => Finding::problem(
            "ring",
            "nothing on the instance that answered can hear a doorbell of this endpoint",
            wake_advice(None, key, &mcp_url),
        ),
        _ if ring["answered"] == true => Finding::ok(
            "ring",
            format!(
                "{} heard the test doorbell and answered in {} ms",
                who(),
                ring["answered_after_ms"].as_i64().unwrap_or(0)
            ),
        ),
        _ => Finding::problem(
            "ring",
            format!(
                "{} got the test doorbell and made no request within {wait}s",
                who()
            ),
            wake_advice(ring["client_name"].as_str(), key, &mcp_url),
        ),
    }
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
/// What wakes an agent whose client is `client` (its `clientInfo.name`;
/// `None`: no client yet). Only Claude Code turns a doorbell into a turn,
/// and only with channels on; every client can be woken by the runner or a
/// notify hook (`docs/agents.md`).
fn wake_advice(client: Option<&str>, key: &str, mcp_url: &str) -> String {
    let token_env = crate::domain::server_key::token_env_var(key);
    let runner = format!(
        "`switchboard work {mcp_url} --token-env {token_env} -- claude -p \"Work the switchboard \
         queue\" --allowedTools \"mcp__{key}\"`, the line vend printed"
    );
    let unattended = format!(
        "for an unattended agent run the runner ({runner}; for Codex `-- codex exec …`) or add a \
         notify hook (`switchboard hook add REF URL`)"
    );
    match client {
        Some(RUNNER_CLIENT_NAME) => "the runner took the doorbells but made no request \
            after them: is `switchboard work` still running? Check its log"
            .to_owned(),
        Some(name) if name.starts_with("claude") => format!(
            "Claude Code drops doorbells unless channels are on for the account and it was started \
             with `claude --dangerously-load-development-channels server:{key}` (a dialog at every \
             start) or the Switchboard plugin as an allowed channel (docs/agents.md); {unattended}"
        ),
        Some(name) => {
            format!("{name} does not act on doorbells (a Claude Code extension): {unattended}")
        }
        None => format!(
            "start Claude Code with `claude --dangerously-load-development-channels server:{key}` \
             (channels on for the account), or {unattended}"
        ),
    }
}

/// The clients of sessions without a stream, with how long each is idle.
fn without_stream(rows: &[Value]) -> String {
    let described: Vec<String> = rows
        .iter()
        .filter(|r| r["streaming"] != Value::Bool(true))
        .map(|r| {
            format!(
                "{} idle {}s",
                r["client_name"].as_str().unwrap_or("unknown client"),
                r["idle_seconds"].as_i64().unwrap_or(0)
            )
        })
        .collect();
    described.join(", ")
}

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
    let mcp_url = text(e, "mcp_url");
    if attached == 0 {
        findings.push(Finding::problem(
            "sessions",
            "no MCP session is attached on the instance that answered",
            format!(
                "nothing can hear a doorbell: {}",
                wake_advice(None, &key, &mcp_url)
            ),
        ));
    } else if streaming == 0 {
        // What `claude mcp list` (a health check), a one-shot `claude -p`
        // or an exited client leaves: a session with no stream. Not a fault
        // of a client that is fine, so not a FAIL; what wakes the agent is
        // a session that listens, as for no session at all.
        findings.push(Finding::note_to_do(
            "sessions",
            format!(
                "{attached} attached ({}), none with its notification stream open: what a health \
                 check such as `claude mcp list`, a one-shot `claude -p` or an exited client \
                 leaves behind; it hears no doorbell and closes by itself",
                without_stream(&rows)
            ),
            format!(
                "nothing listens for doorbells yet: {}",
                wake_advice(None, &key, &mcp_url)
            ),
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
        let quiet = if attached > streaming {
            format!(
                "; {} without a stream, left by a health check or an exited client, closes by itself",
                attached - streaming
            )
        } else {
            String::new()
        };
        findings.push(Finding::ok(
            "sessions",
            format!(
                "{attached} attached, {streaming} streaming ({}){quiet}",
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
                wake_advice(row["client_name"].as_str(), &key, &mcp_url),
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
        assert!(fix.contains("switchboard work"), "{fix}");
    }

    /// What `claude mcp list` leaves behind (a session that never opened
    /// its stream, or whose stream it closed) is a note, not a FAIL: no
    /// client is to be restarted; the note says what would listen.
    #[test]
    fn a_session_without_a_stream_is_a_note_not_a_failure() {
        let mut e = endpoint(None);
        e["sessions"] = json!({"attached": 1, "streaming": 0, "deaf": 0,
            "list": [{"id_prefix": "abcd1234", "client_name": "claude-code",
                      "client_version": "2.1.90", "streaming": false, "deaf_reason": null,
                      "idle_seconds": 12}]});
        let findings = examine_endpoint(&e);
        assert!(
            findings.iter().all(|f| f.level != Level::Problem),
            "{findings:#?}"
        );
        let note = findings.iter().find(|f| f.check == "sessions").unwrap();
        assert_eq!(note.level, Level::Note);
        assert!(note.detail.contains("claude mcp list"), "{}", note.detail);
        assert!(
            note.detail.contains("claude-code idle 12s"),
            "{}",
            note.detail
        );
        let fix = note.fix.as_deref().unwrap();
        assert!(!fix.contains("restart"), "{fix}");
        assert!(fix.contains("switchboard work"), "{fix}");

        // Beside a streaming session it is only counted.
        e["sessions"]["attached"] = json!(2);
        e["sessions"]["streaming"] = json!(1);
        e["sessions"]["list"].as_array_mut().unwrap().push(
            json!({"id_prefix": "efgh5678", "client_name": "switchboard-work",
                         "streaming": true, "deaf_reason": null, "idle_seconds": 0}),
        );
        let findings = examine_endpoint(&e);
        let ok = findings.iter().find(|f| f.check == "sessions").unwrap();
        assert_eq!(ok.level, Level::Ok, "{ok:?}");
        assert!(ok.detail.contains("1 without a stream"), "{}", ok.detail);
    }

    /// The advice follows the client: only Claude Code is told about its
    /// channels flag; Codex and others are pointed at the runner or a hook,
    /// and a deaf runner at its own log.
    #[test]
    fn the_advice_for_a_deaf_session_depends_on_its_client() {
        let fix_for = |client: &str| {
            let mut e = endpoint(Some("unanswered"));
            e["sessions"]["list"][0]["client_name"] = json!(client);
            examine_endpoint(&e)
                .into_iter()
                .find(|f| f.level == Level::Problem)
                .and_then(|f| f.fix)
                .expect("a fix")
        };
        let codex = fix_for("codex-mcp-client");
        assert!(!codex.contains("--dangerously"), "{codex}");
        assert!(codex.contains("does not act on doorbells"), "{codex}");
        assert!(codex.contains("switchboard work") && codex.contains("switchboard hook add"));
        let runner = fix_for(RUNNER_CLIENT_NAME);
        assert!(
            runner.contains("its log") && !runner.contains("--dangerously"),
            "{runner}"
        );
    }
}
