//! `switchboard work MCP_URL -- COMMAND [ARG…]`: the runner (`docs/cli.md`,
//! spec `07`). A client of the endpoint's MCP URL, nothing of the server's:
//! it holds an MCP session with its GET stream open (so the server counts
//! it as a hearer, `clientInfo.name = "switchboard-work"`), and turns each
//! doorbell into a run of a headless agent command.
//!
//! - `session.rs`: MCP over Streamable HTTP (reqwest), `sse.rs`: the stream's
//!   parser, `runs.rs`: when a run may start (slots, the one coalesced
//!   follow-up, the crash-loop backoff), a pure state machine.
//! - Here: the tasks. One keeps the session and its stream (reconnecting
//!   with backoff) and forwards doorbells; one waits for signals; one per
//!   run waits for its command. The loop below owns the state.
//!
//! How it decides that push-eligible work waits (at start, after a
//! reconnect, when a run ends, before a coalesced follow-up starts): the
//! `presence` tool, whose answer says `presence` (`in`/`out`) and `pending`
//! (the endpoint's push-eligible pending todos, as `05` defines them). A run
//! starts for that only when the answer is `in` with `pending > 0`. A
//! doorbell or a digest starts a run without asking: the server rings only
//! an endpoint that is in, and holds every doorbell while it is out.
//!
//! A run started because work waited that exits 0 while no fewer todos wait
//! than when it started made no progress (a command without the right tool
//! permission, an agent that gave up): it counts as a failed run for the
//! crash-loop backoff, so a command that cannot drain the queue never spins.

pub(super) mod example;
mod runs;
mod session;
mod sse;

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use self::runs::{Outcome, Reason, Runs, Trigger};
use self::session::{McpClient, McpError};
use self::sse::SseParser;
use super::UsageError;
use crate::clock::{Clock, SystemClock};
use crate::domain::doorbell::METHOD as DOORBELL_METHOD;
use crate::domain::duration::parse_duration;
use crate::domain::shift::Shift;

/// The reconnect backoff: from this, doubling…
const RECONNECT_FIRST: Duration = Duration::from_millis(250);
/// …up to this.
const RECONNECT_MAX: Duration = Duration::from_secs(30);
/// A stream that carries nothing (not even the server's keep-alive
/// comments, every 15 s by default) this long is taken as dead.
const STREAM_IDLE: Duration = Duration::from_secs(120);

#[derive(Debug, Args)]
pub struct WorkArgs {
    /// The endpoint's MCP URL (`http(s)://HOST/mcp/SLUG`, as vend prints it).
    #[arg(value_name = "MCP_URL")]
    pub mcp_url: String,

    /// The environment variable holding the endpoint's `sbk_` token.
    #[arg(long, value_name = "NAME", default_value = "SWITCHBOARD_TOKEN")]
    pub token_env: String,

    /// Runs at once at most.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub parallel: usize,

    /// After SIGTERM/SIGINT, how long running commands may take to finish
    /// before they are killed (a second signal kills them at once).
    #[arg(long, value_name = "D", default_value = "5m")]
    pub grace: String,

    /// One JSON object per log line (runs and notes) instead of text.
    #[arg(long)]
    pub json: bool,

    /// The command to run (after `--`), e.g. `claude -p "…"`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// What the runner's tasks tell its loop.
enum Event {
    /// The session is initialized and its stream open; `first` the first
    /// time since the runner started; `away` how long the server was away
    /// when this ends an outage.
    Connected { first: bool, away: Option<Duration> },
    /// A doorbell's meta (todo doorbell, digest, test).
    Doorbell(Map<String, Value>),
    /// A run's command exited (or could not start: `status` None).
    RunEnded {
        id: u64,
        trigger: Trigger,
        started: Instant,
        status: Option<std::process::ExitStatus>,
    },
    /// SIGTERM or SIGINT.
    Signal,
    /// The server refused the credential: nothing to retry.
    Fatal(String),
}

/// The runner's own lines on stderr: text, or one JSON object per line.
/// Never a token, never a doorbell's content.
#[derive(Clone, Copy)]
struct Log {
    json: bool,
}

impl Log {
    fn note(&self, event: &str, message: &str) {
        if self.json {
            eprintln!("{}", json!({"event": event, "message": message}));
        } else {
            eprintln!("switchboard work: {message}");
        }
    }

    fn run(&self, trigger: &Trigger, status: Option<std::process::ExitStatus>, duration: Duration) {
        use std::os::unix::process::ExitStatusExt;
        let code = status.and_then(|s| s.code());
        let signal = status.and_then(|s| s.signal());
        if self.json {
            eprintln!(
                "{}",
                json!({
                    "event": "run",
                    "todo_id": trigger.todo_id(),
                    "reason": trigger.reason.as_str(),
                    "exit_code": code,
                    "signal": signal,
                    "duration_ms": duration.as_millis() as u64,
                })
            );
        } else {
            let exit = match (status, code, signal) {
                (None, _, _) => "not-started".to_owned(),
                (_, Some(code), _) => code.to_string(),
                (_, None, Some(signal)) => format!("signal-{signal}"),
                _ => "unknown".to_owned(),
            };
            eprintln!(
                "switchboard work: run todo={} reason={} exit={exit} duration={:.3}s",
                trigger.todo_id().unwrap_or("-"),
                trigger.reason.as_str(),
                duration.as_secs_f64()
            );
        }
    }
}

/// The endpoint's slug: the path segment after `/mcp/`.
fn slug_of(url: &reqwest::Url) -> Option<String> {
    let segments: Vec<&str> = url.path_segments()?.filter(|s| !s.is_empty()).collect();
    match segments.as_slice() {
        [.., "mcp", slug] => Some((*slug).to_owned()),
        _ => None,
    }
}

pub(super) async fn run(args: WorkArgs) -> anyhow::Result<()> {
    let url = reqwest::Url::parse(&args.mcp_url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or_else(|| UsageError(format!("{:?} is not an http(s) URL", args.mcp_url)))?;
    let slug = slug_of(&url).ok_or_else(|| {
        UsageError(format!(
            "{:?} is not an endpoint's MCP URL (…/mcp/SLUG)",
            args.mcp_url
        ))
    })?;
    let token = match std::env::var(&args.token_env) {
        Ok(token) if !token.trim().is_empty() => token.trim().to_owned(),
        _ => {
            return Err(UsageError(format!(
                "the environment variable {} is not set: export the endpoint's token in it \
                 (vend prints the line), or name another variable with --token-env",
                args.token_env
            ))
            .into());
        }
    };
    if args.parallel == 0 {
        return Err(UsageError("--parallel: must be at least 1".into()).into());
    }
    let grace = parse_duration(&args.grace, "grace").map_err(|e| UsageError(format!("--{e}")))?;
    runner(
        Runner {
            url,
            slug,
            token,
            parallel: args.parallel,
            grace,
            grace_text: args.grace,
            json: args.json,
            command: args.command,
        },
        None,
    )
    .await
}

/// A runner, its arguments checked.
pub(super) struct Runner {
    pub url: reqwest::Url,
    pub slug: String,
    pub token: String,
    pub parallel: usize,
    pub grace: Duration,
    /// `grace` as the user wrote it, for the log.
    pub grace_text: String,
    pub json: bool,
    pub command: Vec<String>,
}

/// Runs until a signal (or a refused credential). `ready` is told once,
/// when the session listens and the start check is done: from then on a
/// push rings it (`switchboard quickstart` pushes its first todo then).
pub(super) async fn runner(
    args: Runner,
    mut ready: Option<tokio::sync::oneshot::Sender<()>>,
) -> anyhow::Result<()> {
    let (url, slug, token, grace) = (
        args.url.clone(),
        args.slug.clone(),
        args.token.clone(),
        args.grace,
    );
    let log = Log { json: args.json };
    let client = Arc::new(McpClient::new(url.as_str(), &token)?);
    let (tx, mut rx) = unbounded_channel::<Event>();
    signals(tx.clone()).context("installing signal handlers")?;
    let connected = tokio::spawn(connection(client.clone(), tx.clone(), log));

    let spawner = Spawner {
        command: args.command.clone(),
        mcp_url: url.to_string(),
        token: token.clone(),
        slug,
    };
    let mut runs = Runs::new(args.parallel);
    let mut children: HashMap<u64, u32> = HashMap::new();
    let mut next_id: u64 = 0;
    // Set by the first signal (or a fatal refusal): when running commands are killed.
    let mut stop_deadline: Option<tokio::time::Instant> = None;
    let mut killed = false;
    let mut fatal: Option<String> = None;

    log.note(
        "starting",
        &format!(
            "watching {} (up to {} run(s) at once)",
            url.as_str(),
            args.parallel
        ),
    );
    loop {
        let wake = runs
            .wake_at(Instant::now())
            .map(tokio::time::Instant::from_std);
        let event = tokio::select! {
            event = rx.recv() => event,
            _ = sleep_until_opt(wake) => None,
            _ = sleep_until_opt(stop_deadline.filter(|_| !killed)) => {
                log.note("grace_over", &format!(
                    "the grace of {} is over: killing {} running command(s)",
                    args.grace_text, children.len()));
                kill_all(&children);
                killed = true;
                None
            }
        };
        let now = Instant::now();
        match event {
            None => {}
            Some(Event::Connected { first, away }) => {
                if first {
                    clock_in_if_ours(&client, log).await;
                }
                if stop_deadline.is_none() && pending_work(&client).await.is_some() {
                    runs.ask(Trigger::new(Reason::Start), now);
                }
                // Logged once the start check is done: from here on, a push rings.
                match (first, away) {
                    (true, _) => {
                        log.note("connected", "connected; listening for doorbells");
                        if let Some(ready) = ready.take() {
                            let _ = ready.send(());
                        }
                    }
                    (false, Some(away)) => log.note(
                        "reconnected",
                        &format!(
                            "reconnected (the server was away for {:.1}s)",
                            away.as_secs_f64()
                        ),
                    ),
                    (false, None) => {}
                }
            }
            Some(Event::Doorbell(meta)) => {
                // Answer on our own session, so that the ring counts as heard.
                let pinger = client.clone();
                tokio::spawn(async move {
                    let _ = pinger.request("ping", json!({})).await;
                });
                if meta.get("kind").and_then(Value::as_str) == Some("test") {
                    log.note(
                        "test_doorbell",
                        "a test doorbell: answered, nothing started",
                    );
                } else {
                    runs.ask(Trigger::doorbell(meta), now);
                }
            }
            Some(Event::RunEnded {
                id,
                trigger,
                started,
                status,
            }) => {
                children.remove(&id);
                log.run(&trigger, status, now.saturating_duration_since(started));
                let mut success = status.is_some_and(|s| s.success());
                if let (true, Some(before)) = (success, trigger.pending)
                    && pending_work(&client)
                        .await
                        .is_some_and(|after| after >= before)
                {
                    success = false;
                    log.note(
                        "no_progress",
                        &format!(
                            "the command exited 0 but as many todos wait as when it started \
                             ({before}): counted as a failed run"
                        ),
                    );
                }
                if let Outcome::BackOff(pause) = runs.finished(success, now) {
                    log.note(
                        "backoff",
                        &format!(
                            "the command failed {} times in a row within {}s: backing off, \
                             no run for {}s",
                            runs::STRIKES,
                            runs::STRIKE_WINDOW.as_secs(),
                            pause.as_secs()
                        ),
                    );
                }
                // Work may still wait: checked before the follow-up starts.
                runs.ask(Trigger::new(Reason::FollowUp), now);
            }
            Some(Event::Signal) => {
                if stop_deadline.is_none() {
                    runs.stop();
                    stop_deadline = Some(tokio::time::Instant::now() + grace);
                    log.note(
                        "stopping",
                        &format!(
                            "stopping: clocking the endpoint out; {} running command(s) \
                             may finish within {} (a second signal kills them)",
                            runs.running(),
                            args.grace_text
                        ),
                    );
                    match client.call_tool("clock_out", json!({})).await {
                        Ok(_) => log.note("clocked_out", "clocked the endpoint out"),
                        Err(e) => log.note(
                            "clock_out_failed",
                            &format!("could not clock the endpoint out: {e}"),
                        ),
                    }
                } else if !killed {
                    log.note(
                        "killing",
                        &format!(
                            "second signal: killing {} running command(s)",
                            children.len()
                        ),
                    );
                    kill_all(&children);
                    killed = true;
                }
            }
            Some(Event::Fatal(message)) => {
                log.note("fatal", &message);
                fatal = Some(message);
                runs.stop();
                stop_deadline.get_or_insert(tokio::time::Instant::now() + grace);
            }
        }
        if stop_deadline.is_some() && runs.running() == 0 {
            break;
        }
        // Start whatever may start now.
        while let Some(mut trigger) = runs.next(Instant::now()) {
            if trigger.reason == Reason::FollowUp {
                match pending_work(&client).await {
                    Some(pending) => trigger.pending = Some(pending),
                    None => {
                        runs.cancel();
                        continue;
                    }
                }
            }
            next_id += 1;
            match spawner.spawn(next_id, trigger, tx.clone()) {
                Some(pid) => {
                    children.insert(next_id, pid);
                }
                None => log.note(
                    "spawn_failed",
                    &format!("cannot start {:?}", spawner.command[0]),
                ),
            }
        }
    }
    // Ending our own session ends its stream: the connection task must not
    // take that for the server going away.
    connected.abort();
    client.close().await;
    match fatal {
        Some(message) => Err(anyhow::anyhow!(message)),
        None => {
            log.note("stopped", "stopped");
            Ok(())
        }
    }
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Whether a run should start for waiting work: `presence` answers `in`
/// with push-eligible todos pending (how many). Unanswered (the server
/// away) is no: the reconnect asks again.
async fn pending_work(client: &McpClient) -> Option<i64> {
    let answer = client.call_tool("presence", json!({})).await.ok()?;
    let pending = answer["pending"].as_i64()?;
    (answer["presence"] == "in" && pending > 0).then_some(pending)
}

/// At start: clock back in when the endpoint is out by an agent's own
/// `clock_out` (the runner's last stop) — never over an operator's override
/// or a shift. An agent's `out` that a shift would also hold out is left
/// alone too: `clock_in` there would write an `in` override over the shift.
async fn clock_in_if_ours(client: &McpClient, log: Log) {
    let Ok(answer) = client.call_tool("presence", json!({})).await else {
        return;
    };
    if answer["presence"] != "out" || answer["source"] != "agent" {
        return;
    }
    if let Some(shift) = answer["shift"].as_str() {
        let inside = Shift::parse(shift).is_ok_and(|s| s.contains(SystemClock.now()));
        if !inside {
            log.note(
                "clock_in_skipped",
                "the endpoint is out by an agent and its shift is out now: staying out",
            );
            return;
        }
    }
    match client.call_tool("clock_in", json!({})).await {
        Ok(_) => log.note(
            "clocked_in",
            "clocked the endpoint back in (it was out by an agent's clock_out)",
        ),
        Err(e) => log.note(
            "clock_in_failed",
            &format!("could not clock the endpoint in: {e}"),
        ),
    }
}

/// SIGTERM and SIGINT, each time, as [`Event::Signal`].
fn signals(tx: UnboundedSender<Event>) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            if tx.send(Event::Signal).is_err() {
                return;
            }
        }
    });
    Ok(())
}

/// Kills every running command with its process group (each run is a group
/// of its own, so a terminal's Ctrl-C reaches only the runner).
fn kill_all(children: &HashMap<u64, u32>) {
    for pid in children.values() {
        if let Some(pid) = i32::try_from(*pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

struct Spawner {
    command: Vec<String>,
    mcp_url: String,
    token: String,
    slug: String,
}

impl Spawner {
    /// Starts one run; its end comes back as [`Event::RunEnded`]. The pid,
    /// or None when the command could not start (reported as a run that
    /// failed, so a missing program backs off like a crashing one).
    fn spawn(&self, id: u64, trigger: Trigger, tx: UnboundedSender<Event>) -> Option<u32> {
        let started = Instant::now();
        let mut command = tokio::process::Command::new(&self.command[0]);
        command
            .args(&self.command[1..])
            .env("SWITCHBOARD_MCP_URL", &self.mcp_url)
            .env("SWITCHBOARD_TOKEN", &self.token)
            .env("SWITCHBOARD_ENDPOINT", &self.slug)
            .env_remove("SWITCHBOARD_DOORBELL")
            .env_remove("SWITCHBOARD_TODO_ID")
            .stdin(Stdio::null())
            .process_group(0)
            .kill_on_drop(false);
        if let Some(meta) = &trigger.meta {
            command.env(
                "SWITCHBOARD_DOORBELL",
                Value::Object(meta.clone()).to_string(),
            );
        }
        if let Some(todo) = trigger.todo_id() {
            command.env("SWITCHBOARD_TODO_ID", todo);
        }
        match command.spawn() {
            Ok(mut child) => {
                let pid = child.id();
                tokio::spawn(async move {
                    let status = child.wait().await.ok();
                    let _ = tx.send(Event::RunEnded {
                        id,
                        trigger,
                        started,
                        status,
                    });
                });
                pid
            }
            Err(_) => {
                let _ = tx.send(Event::RunEnded {
                    id,
                    trigger,
                    started,
                    status: None,
                });
                None
            }
        }
    }
}

/// The session and its stream: (re)initializes, opens the GET stream,
/// forwards doorbells, and reconnects with backoff while the server is away
/// — one log line when an outage starts and one when it ends, not one per try.
async fn connection(client: Arc<McpClient>, tx: UnboundedSender<Event>, log: Log) {
    let mut backoff = RECONNECT_FIRST;
    let mut first = true;
    let mut outage: Option<Instant> = None;
    let lost = |why: &str, outage: &mut Option<Instant>, first: bool| {
        if outage.is_none() {
            *outage = Some(Instant::now());
            let what = if first {
                "cannot reach the server"
            } else {
                "lost the server"
            };
            log.note(
                "disconnected",
                &format!("{what} ({why}); retrying with backoff, up to every 30s"),
            );
        }
    };
    loop {
        let fresh = !client.has_session();
        if fresh {
            match client.initialize().await {
                Ok(()) => {}
                Err(McpError::Refused(message)) => {
                    let _ = tx.send(Event::Fatal(message));
                    return;
                }
                Err(e) => {
                    lost(&e.to_string(), &mut outage, first);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(RECONNECT_MAX);
                    continue;
                }
            }
        }
        let mut response = match client.open_stream().await {
            Ok(response) => response,
            Err(McpError::SessionGone) if !fresh => {
                client.forget_session();
                continue;
            }
            Err(McpError::Refused(message)) => {
                let _ = tx.send(Event::Fatal(message));
                return;
            }
            Err(e) => {
                client.forget_session();
                lost(&e.to_string(), &mut outage, first);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(RECONNECT_MAX);
                continue;
            }
        };
        backoff = RECONNECT_FIRST;
        let away = outage.take().map(|since| since.elapsed());
        if tx.send(Event::Connected { first, away }).is_err() {
            return;
        }
        first = false;
        let mut parser = SseParser::new();
        let why = loop {
            match tokio::time::timeout(STREAM_IDLE, response.chunk()).await {
                Ok(Ok(Some(bytes))) => {
                    for event in parser.feed(&bytes) {
                        if event.event != "message" {
                            continue;
                        }
                        if let Some(meta) = doorbell_meta(&event.data)
                            && tx.send(Event::Doorbell(meta)).is_err()
                        {
                            return;
                        }
                    }
                }
                Ok(Ok(None)) => break "the stream ended",
                Ok(Err(_)) => break "the stream broke",
                Err(_) => break "the stream went silent",
            }
        };
        lost(why, &mut outage, first);
    }
}

/// A doorbell's meta, if `data` is a `notifications/claude/channel`
/// notification; anything else on the stream is ignored.
fn doorbell_meta(data: &str) -> Option<Map<String, Value>> {
    let message: Value = serde_json::from_str(data).ok()?;
    if message.get("method")?.as_str()? != DOORBELL_METHOD || message.get("id").is_some() {
        return None;
    }
    match message.pointer("/params/meta") {
        Some(Value::Object(meta)) => Some(meta.clone()),
        _ => Some(Map::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_come_from_the_mcp_path() {
        let slug = |u: &str| slug_of(&reqwest::Url::parse(u).unwrap());
        assert_eq!(slug("http://h:8080/mcp/ab12").as_deref(), Some("ab12"));
        assert_eq!(slug("https://h/prefix/mcp/ab12/").as_deref(), Some("ab12"));
        assert_eq!(slug("http://h/api/v1/ab12"), None);
        assert_eq!(slug("http://h/"), None);
    }

    #[test]
    fn only_channel_notifications_are_doorbells() {
        let bell = r#"{"jsonrpc":"2.0","method":"notifications/claude/channel","params":{"content":"x","meta":{"todo_id":"td_1","queue":"q"}}}"#;
        assert_eq!(
            doorbell_meta(bell).unwrap().get("todo_id"),
            Some(&json!("td_1"))
        );
        assert_eq!(
            doorbell_meta(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
            None
        );
        assert_eq!(doorbell_meta("not json"), None);
    }
}
