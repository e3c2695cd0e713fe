//! The real binary under hostile clients and faults of the HTTP edge and the
//! database (issue 48, `docs/operations.md`, "Under abuse"): SQLite locked
//! from outside, sockets that send nothing, refusals answered before the
//! body, and a PostgreSQL whose connection slots are all taken.
//!
//! Every wait is bounded; the timeouts under test are set short by flags.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::mcp::{Answer, client};
use crate::support::served::{Served, serve};
use crate::support::server::Process;
use switchboard::testkit::PgCluster;

/// An answer and how long it took.
#[derive(Debug)]
struct Timed {
    answer: Answer,
    took: Duration,
}

impl Served {
    async fn send_timed(&self, request: reqwest::RequestBuilder) -> Timed {
        let started = Instant::now();
        let response = tokio::time::timeout(Duration::from_secs(20), request.send())
            .await
            .expect("answered within 20 s")
            .expect("an HTTP answer");
        let answer = Answer::read(response).await;
        Timed {
            answer,
            took: started.elapsed(),
        }
    }

    async fn get_as(&self, path: &str, token: &str) -> Timed {
        self.send_timed(self.http.get(self.process.url(path)).bearer_auth(token))
            .await
    }

    async fn post_as(&self, path: &str, token: &str, body: Value) -> Timed {
        self.send_timed(
            self.http
                .post(self.process.url(path))
                .bearer_auth(token)
                .json(&body),
        )
        .await
    }

    /// Vends an endpoint; returns (slug, token).
    async fn vend_timed(&self, agent: &str) -> (String, String) {
        let got = self
            .post_as("/api/v1/endpoints", &self.admin, json!({"agent": agent}))
            .await;
        assert_eq!(got.answer.status, 201, "vend: {}", got.answer.text());
        let v = got.answer.json();
        (
            v["slug"].as_str().unwrap().to_owned(),
            v["token"].as_str().unwrap().to_owned(),
        )
    }
}

/// An outage's answer: 503 `unavailable` with `Retry-After`, promptly.
fn assert_unavailable(what: &str, got: &Timed, within: Duration) {
    assert_eq!(
        got.answer.status,
        503,
        "{what}: {} {}",
        got.answer.status,
        got.answer.text()
    );
    assert_eq!(
        got.answer.header("retry-after"),
        Some("1"),
        "{what}: {:?}",
        got.answer.headers
    );
    assert!(
        got.took < within,
        "{what} took {:?} to answer 503 (at most {within:?})",
        got.took
    );
}

/// Issue 48, item 2: an outside write lock on the SQLite file held past the
/// busy timeout made a request wait 5 s and answer `500 internal` (the
/// token's `last_used_at` write). Now every write waits for the lock at
/// most `--db-acquire-timeout` and answers 503 `unavailable` with
/// `Retry-After`, on the API (its writes and the token stamp) and on MCP
/// (the writer thread); once the lock is gone, everything works again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_a_write_lock_held_outside_answers_503_with_retry_after_promptly() {
    let s = serve(None, &["--db-acquire-timeout", "500ms"]);
    let (slug, token) = s.vend_timed("worker").await;
    let mcp = s.mcp(&slug, &token);
    let session = mcp.initialize().await;
    let push = format!("/api/v1/endpoints/{slug}/todos");
    assert_eq!(
        s.post_as(&push, &s.admin, json!({"title": "before"}))
            .await
            .answer
            .status,
        201
    );
    // A token never used yet: its first request stamps `last_used_at`.
    let fresh = s
        .post_as("/api/v1/tokens", &s.admin, json!({"label": "fresh"}))
        .await;
    assert_eq!(fresh.answer.status, 201, "{}", fresh.answer.text());
    let fresh = fresh.answer.json()["token"].as_str().unwrap().to_owned();

    // Another process's write transaction on the same file (as `sqlite3`
    // or a backup tool would hold it), for longer than any timeout.
    let holder = rusqlite::Connection::open(s.dir.path().join("switchboard.db")).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    holder
        .execute_batch("UPDATE humans SET name = name")
        .unwrap();

    // Within the acquire timeout twice over (the connection, then the
    // lock) plus slack for a loaded machine; the old behaviour was 5 s.
    let within = Duration::from_millis(2_500);
    for round in 0..2 {
        let stamp = s.get_as("/api/v1/agents", &fresh).await;
        assert_unavailable(&format!("the token's stamp, round {round}"), &stamp, within);
        let write = s.post_as(&push, &s.admin, json!({"title": "during"})).await;
        assert_unavailable(&format!("a push, round {round}"), &write, within);
        let started = Instant::now();
        let claim = mcp.call_raw(&session, "claim_next", json!({})).await;
        let claim = Timed {
            answer: claim,
            took: started.elapsed(),
        };
        assert_unavailable(&format!("MCP claim_next, round {round}"), &claim, within);
    }
    // Reads do not wait for the writer (WAL).
    let read = s.get_as("/api/v1/agents", &s.admin).await;
    assert_eq!(read.answer.status, 200, "{}", read.answer.text());

    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);
    assert_eq!(s.get_as("/api/v1/agents", &fresh).await.answer.status, 200);
    let claimed = mcp.call_ok(&session, "claim_next", json!({})).await;
    assert_eq!(claimed["todo"]["title"], "before", "{claimed}");
    assert!(
        !s.process.log_text().contains("answered as internal"),
        "a lock is not a bug:\n{}",
        s.process.log_text()
    );
}

/// Issue 48, item 3: a connection that sends no byte was neither reading a
/// head nor evictable, so `--max-connections` silent sockets stalled every
/// new client until the idle timeout. Now a silent connection is cut at the
/// header timeout (counted from the accept), and at the cap one silent for
/// a second makes room for a client that arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_neither_hold_the_cap_nor_outlive_the_header_timeout() {
    let s = serve(
        None,
        &[
            "--max-connections",
            "8",
            "--header-read-timeout",
            "3s",
            "--idle-timeout",
            "60s",
        ],
    );
    let addr = s.process.addr.clone();
    let mut silent = Vec::new();
    for _ in 0..8 {
        silent.push(TcpStream::connect(&addr).await.expect("connect"));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    // The cap is full of silent sockets: a new client is still answered,
    // once one of them has been silent for a second, not after 60 s.
    let fresh = s.send_timed(client().get(s.process.url("/healthz"))).await;
    assert_eq!(fresh.answer.status, 200);
    assert!(
        fresh.took < Duration::from_millis(2_500),
        "answered {:?} after arriving at a cap of silent sockets",
        fresh.took
    );
    eprintln!(
        "at a cap of 8 silent sockets, /healthz answered in {:?}",
        fresh.took
    );
    let evicted = "switchboard_http_connections_closed_total{reason=\"evicted_at_cap\"}";
    assert!(s.metric(evicted).await >= 1.0);

    // The rest are cut at the header timeout of their accept, not kept
    // for the idle timeout.
    let started = Instant::now();
    let mut closed = 0;
    for mut socket in silent {
        let mut buf = [0u8; 64];
        match tokio::time::timeout(Duration::from_secs(10), socket.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => closed += 1,
            Ok(Ok(n)) => panic!("a silent socket got an answer: {:?}", &buf[..n]),
            Err(_) => panic!("a silent socket still open {:?} later", started.elapsed()),
        }
    }
    assert_eq!(closed, 8);
    assert!(
        started.elapsed() < Duration::from_secs(3) + Duration::from_millis(2_500),
        "the silent sockets lasted {:?}",
        started.elapsed()
    );
    // Each was either evicted (for the client, or for a scrape of
    // /metrics) or cut at the header timeout.
    let header = "switchboard_http_connections_closed_total{reason=\"header_timeout\"}";
    let cut = s.metric(header).await;
    let evicted = s.metric(evicted).await;
    assert!(
        cut >= 1.0 && cut + evicted >= 8.0,
        "{cut} cut, {evicted} evicted"
    );
}

/// One HTTP/1.1 response read from a kept-alive connection: its status,
/// its head (lower-case), and whether its body arrived whole.
async fn read_response(stream: &mut TcpStream) -> Option<(u16, String)> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => raw.extend_from_slice(&buf[..n]),
            _ => return None,
        }
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    let status = head.get(9..12)?.parse().ok()?;
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap_or(0));
    let chunked = head.contains("transfer-encoding: chunked");
    let mut body = raw[head_end..].to_vec();
    loop {
        let done = if chunked {
            body.ends_with(b"0\r\n\r\n")
        } else {
            body.len() >= length
        };
        if done {
            return Some((status, head));
        }
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => body.extend_from_slice(&buf[..n]),
            _ => return None,
        }
    }
}

/// Sends `head` (which declares a body of `body.len()` bytes), then the
/// body a moment later as a client streaming an upload does, without
/// waiting for the answer; returns the answer's status and head.
async fn refused_early(stream: &mut TcpStream, head: &str, body: &[u8]) -> (u16, String) {
    stream.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    // The answer may already be here: a refused body is still sent, as
    // clients do; a write error means the server hung up.
    let _ = stream.write_all(body).await;
    read_response(stream)
        .await
        .unwrap_or_else(|| panic!("no answer to {head}"))
}

/// A second request on the same connection: answered 200.
async fn still_usable(stream: &mut TcpStream, what: &str) {
    let second = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    let written = stream.write_all(second).await;
    let answer = match written {
        Ok(()) => read_response(stream).await,
        Err(_) => None,
    };
    assert!(
        matches!(answer, Some((200, _))),
        "after {what}, the kept-alive connection broke: {answer:?}"
    );
}

/// Issue 48, item 4: a refusal answered before its request body was read
/// closed the connection without `Connection: close`, and the client's next
/// request on it failed (EPIPE / ECONNRESET). Now the rest of the body is
/// read and discarded after the answer and the connection stays usable; a
/// body too long to discard, or one the client holds back behind
/// `Expect: 100-continue`, gets `Connection: close` on the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_refusals_keep_the_connection_usable_or_say_connection_close() {
    let s = serve(None, &[]);
    let (slug, token) = s.vend_timed("worker").await;
    let addr = s.process.addr.clone();
    let body = format!("{{\"agent\": \"{}\"}}", "x".repeat(8_000));
    let cases: Vec<(&str, u16, String)> = vec![
        (
            "401 without a credential",
            401,
            "POST /api/v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\n\
             Content-Type: application/json\r\n"
                .to_owned(),
        ),
        (
            "403 from another origin",
            403,
            format!(
                "POST /api/v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://evil.example\r\n\
                 Authorization: Bearer {}\r\nContent-Type: application/json\r\n",
                s.admin
            ),
        ),
        (
            "404 of an unknown route",
            404,
            format!(
                "POST /api/v1/no-such-thing HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                 Authorization: Bearer {}\r\nContent-Type: application/json\r\n",
                s.admin
            ),
        ),
        (
            "415 of an MCP post that is not JSON",
            415,
            format!(
                "POST /mcp/{slug} HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                 Authorization: Bearer {token}\r\nContent-Type: text/plain\r\n"
            ),
        ),
        (
            "the board's 303 to its sign-in",
            303,
            "POST /board/todos/bulk HTTP/1.1\r\nHost: 127.0.0.1\r\n\
             Content-Type: application/x-www-form-urlencoded\r\n"
                .to_owned(),
        ),
    ];
    for (what, status, head) in &cases {
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        let head = format!("{head}Content-Length: {}\r\n\r\n", body.len());
        let (got, answer) = refused_early(&mut stream, &head, body.as_bytes()).await;
        assert_eq!(got, *status, "{what}: {answer}");
        assert!(
            !answer.contains("connection: close"),
            "{what}: a short body is discarded, not a reason to close: {answer}"
        );
        still_usable(&mut stream, what).await;
        // And once more: the connection is as good as new.
        let (again, _) = refused_early(&mut stream, &head, body.as_bytes()).await;
        assert_eq!(again, *status, "{what}, twice");
        still_usable(&mut stream, what).await;
    }

    // A body too long to discard: the answer says the connection closes.
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let head = "POST /api/v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                Content-Type: application/json\r\nContent-Length: 10000000\r\n\r\n";
    let (got, answer) = refused_early(&mut stream, head, &[b'x'; 4096]).await;
    assert_eq!(got, 401, "{answer}");
    assert!(answer.contains("connection: close"), "{answer}");

    // A chunked body: its end is not told apart from a pause, so the
    // answer says the connection closes.
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let head = "POST /api/v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    let (got, answer) = refused_early(&mut stream, head, b"4\r\nxxxx\r\n0\r\n\r\n").await;
    assert_eq!(got, 401, "{answer}");
    assert!(answer.contains("connection: close"), "{answer}");

    // A client that waits for `100 Continue` before its body is told to
    // close: its body will not come unless asked for.
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /api/v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let (got, answer) = read_response(&mut stream).await.expect("an answer");
    assert_eq!(got, 401, "{answer}");
    assert!(answer.contains("connection: close"), "{answer}");

    // Nothing refused was written.
    let agents = s.get_as("/api/v1/agents", &s.admin).await;
    assert_eq!(
        agents.answer.json()["agents"].as_array().map(Vec::len),
        Some(1)
    );
}

/// The same for a 429: the refusal comes from the rate limiter before the
/// body is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_refusal_keeps_the_connection_usable() {
    let dir = tempfile::tempdir().unwrap();
    // A write budget below one request: every write is refused.
    let process = Process::start(dir.path(), &["--api-write-rate", "0.1"]);
    let admin = process.first_token().unwrap();
    let body = format!("{{\"name\": \"{}\"}}", "x".repeat(8_000));
    let head = format!(
        "POST /api/v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {admin}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut stream = TcpStream::connect(&process.addr).await.unwrap();
    for round in 0..3 {
        let (got, answer) = refused_early(&mut stream, &head, body.as_bytes()).await;
        assert_eq!(got, 429, "round {round}: {answer}");
        assert!(answer.contains("retry-after:"), "{answer}");
        assert!(!answer.contains("connection: close"), "{answer}");
        still_usable(&mut stream, "a 429").await;
    }
}

/// Issue 48, item 5: the circuit opened on a database that answered — the
/// probe's own reconnect met the connection limit (SQLSTATE 53300) while
/// the pool's connections worked, and every request answered 503. A
/// throwaway cluster with a tiny `max_connections`, the server on an
/// ordinary role, every slot then taken (the superuser's reserved ones
/// too, but one), and the probe's connection terminated: its reconnect is
/// refused for want of a slot, yet the circuit stays closed and requests
/// are served by the pool's connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_circuit_stays_closed_when_only_connection_slots_are_taken() {
    use sqlx::Connection;
    let Some(pg) = tokio::task::block_in_place(|| PgCluster::start_new("hostile_http_slots"))
    else {
        return;
    };
    pg.sql("ALTER SYSTEM SET max_connections = 20").await;
    tokio::task::block_in_place(|| pg.restart());
    pg.sql("CREATE ROLE sb LOGIN").await;
    pg.sql("CREATE DATABASE sb OWNER sb").await;
    let url = format!("postgres://sb@127.0.0.1:{}/sb", pg.port);
    let s = serve(Some(&url), &["--db-max-connections", "9"]);
    let (slug, token) = s.vend_timed("worker").await;
    let mcp = s.mcp(&slug, &token);
    let session = mcp.initialize().await;
    let push = format!("/api/v1/endpoints/{slug}/todos");
    let endpoint = format!("/api/v1/endpoints/{slug}");
    // Every pool at its size: concurrent requests of each kind.
    for _ in 0..3 {
        let pushes = (0..6).map(|i| s.post_as(&push, &s.admin, json!({"title": format!("w{i}")})));
        let reads = (0..6).map(|_| s.get_as(&endpoint, &s.admin));
        let claims = (0..4).map(|_| mcp.call_raw(&session, "claim_next", json!({})));
        let (pushes, reads, claims) = tokio::join!(
            futures_util::future::join_all(pushes),
            futures_util::future::join_all(reads),
            futures_util::future::join_all(claims),
        );
        assert!(pushes.iter().all(|p| p.answer.status == 201));
        assert!(reads.iter().all(|r| r.answer.status == 200));
        assert!(claims.iter().all(|c| c.status == 200));
    }

    // Take every slot left, as other clients of a busy database would.
    let mut taken = Vec::new();
    loop {
        match sqlx::PgConnection::connect(&pg.url()).await {
            Ok(conn) => taken.push(conn),
            Err(e) => {
                assert!(e.to_string().contains("too many"), "{e}");
                break;
            }
        }
        assert!(taken.len() < 20, "max_connections = 20 was not in force");
    }
    // The probe loses its connection; one slot frees, which only a
    // superuser may take: the probe's reconnect is refused (53300).
    let terminated: Vec<(bool,)> = sqlx::query_as(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE application_name = 'switchboard-probe'",
    )
    .fetch_all(&mut taken[0])
    .await
    .unwrap();
    assert_eq!(terminated, [(true,)], "the probe's one connection");

    let started = Instant::now();
    let mut answered = 0;
    while started.elapsed() < Duration::from_secs(3) {
        let read = s.get_as(&endpoint, &s.admin).await;
        assert_eq!(read.answer.status, 200, "{}", read.answer.text());
        let pushed = s.post_as(&push, &s.admin, json!({"title": "busy"})).await;
        assert_eq!(pushed.answer.status, 201, "{}", pushed.answer.text());
        let claimed = mcp.call_raw(&session, "claim_next", json!({})).await;
        assert_eq!(claimed.status, 200, "{}", claimed.text());
        let ready = s.get_as("/readyz", &s.admin).await;
        assert_eq!(ready.answer.status, 200, "{}", ready.answer.text());
        answered += 4;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The probe did try, and was refused for want of a slot.
    let probes: Vec<(i32,)> = sqlx::query_as(
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'switchboard-probe'",
    )
    .fetch_all(&mut taken[0])
    .await
    .unwrap();
    assert!(probes.is_empty(), "the probe found a slot: {probes:?}");
    assert!(
        pg.log_text()
            .contains("remaining connection slots are reserved"),
        "no reconnect was refused:\n{}",
        pg.log_text()
    );
    eprintln!("{answered} requests answered while every slot was taken");
    assert!(
        !s.process.log_text().contains("database unreachable"),
        "the circuit opened:\n{}",
        s.process.log_text()
    );
    for conn in taken {
        let _ = conn.close().await;
    }
}

/// After a refusal's body was discarded, the connection is idle again, not
/// a head half read: it lives for the idle timeout, not the header timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discarded_body_leaves_the_connection_idle_not_reading_a_head() {
    let s = serve(
        None,
        &["--header-read-timeout", "1s", "--idle-timeout", "60s"],
    );
    let body = "x".repeat(8_000);
    let head = format!(
        "POST /api/v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut stream = TcpStream::connect(&s.process.addr).await.unwrap();
    let (got, answer) = refused_early(&mut stream, &head, body.as_bytes()).await;
    assert_eq!(got, 401, "{answer}");
    // Well past the header timeout, well within the idle timeout.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    still_usable(&mut stream, "a pause after a discarded body").await;
}
