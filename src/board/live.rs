//! `/board/events`: one SSE stream per signed-in page, saying when
//! something of this human's fleet changed (`event: changed`, data
//! `todos`, `endpoints`, `presence` or `tick`); pages re-fetch their live
//! regions on it (htmx's SSE extension).
//!
//! The bus carries ids only and not every change is published on it (an
//! API push, a claim or a heartbeat is not), so the stream re-reads a small
//! fingerprint of the human's fleet — endpoints, their presence inputs,
//! work counts, the newest todo, this instance's sessions — when a bus
//! message names one of the human's endpoints, and every
//! [`BoardContext::poll_every`](super::BoardContext) otherwise; and sends a
//! `tick` at least every `tick_every`, for times that drift by themselves.
//! It ends when the server shuts down, or — after one last `signed-out`
//! event — when the session's token stops being live (checked on each poll).
//!
//! Under abuse (issue 48: 1 000 streams of one browser cost half a core
//! with nothing happening): a human has at most
//! [`MAX_LIVE_STREAMS_PER_HUMAN`] streams open on an instance — one more is
//! refused with 429 — and all of them share one watcher ([`LiveHub`]): one
//! fingerprint read per poll and per bus message for the human, however
//! many pages are open; each stream only checks its own session.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::fmt::Write;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::{broadcast, watch};
use tokio::time::{Interval, MissedTickBehavior, interval};

use super::BoardState;
use super::auth::{COOKIE, Signed};
use super::view::all_endpoints;
use crate::bus::{BusEvent, Message, Subscription};
use crate::domain::ids::sha256_hex;
use crate::http::auth::cookie;
use crate::store::{PageRequest, TodoFilter};

/// What a human's fleet looked like, one part per kind of change.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Fingerprint {
    endpoints: String,
    presence: String,
    todos: String,
    ids: Vec<String>,
}

async fn fingerprint(state: &BoardState, human_id: &str) -> Option<Fingerprint> {
    let endpoints = all_endpoints(state, human_id).await.ok()?;
    let mut f = Fingerprint::default();
    for e in &endpoints {
        let counts = state.delivery.sessions().counts(&e.id);
        let _ = write!(
            f.endpoints,
            "{}|{:?}|{:?}|{:?}|{:?}|{:?}|{}/{};",
            e.id,
            e.state,
            e.last_seen_at,
            e.last_contact_at,
            e.last_note,
            e.expires_at,
            counts.attached,
            counts.streaming,
        );
        let _ = write!(
            f.presence,
            "{}|{:?}|{:?}|{:?}|{:?};",
            e.id, e.shift, e.presence_override, e.override_until, e.presence_seen
        );
        f.ids.push(e.id.clone());
    }
    let activity = state.store.endpoint_activity(&f.ids).await.ok()?;
    for id in &f.ids {
        if let Some(a) = activity.get(id) {
            let _ = write!(
                f.todos,
                "{id}|{}|{}|{}|{:?};",
                a.pending, a.claimed, a.dead_letters, a.working_on
            );
        }
    }
    let newest = state
        .store
        .human_list_todos(
            human_id,
            &TodoFilter::default(),
            &PageRequest {
                limit: 1,
                after: None,
            },
        )
        .await
        .ok()?;
    for t in newest.items {
        let _ = write!(f.todos, "newest {}|{:?}", t.id, t.updated_at);
    }
    Some(f)
}

/// Which kinds changed from `old` to `new`.
fn changes(old: &Fingerprint, new: &Fingerprint) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    if old.todos != new.todos {
        kinds.push("todos");
    }
    if old.endpoints != new.endpoints {
        kinds.push("endpoints");
    }
    if old.presence != new.presence {
        kinds.push("presence");
    }
    kinds
}

fn changed(kind: &str) -> Event {
    Event::default().event("changed").data(kind)
}

/// The most live streams one human may hold open on one instance (a
/// browser opens one per page; browsers themselves allow six connections
/// per host over HTTP/1.1).
pub const MAX_LIVE_STREAMS_PER_HUMAN: usize = 8;

/// What every stream of a human hears: the kinds that changed (`todos
/// endpoints`, `tick`, …), as one `changed` event's data.
type Kinds = Arc<str>;

/// The live streams of this instance, per human: how many are open, and
/// the one watcher they share.
#[derive(Debug, Default)]
pub struct LiveHub {
    humans: Mutex<HashMap<String, Watched>>,
}

#[derive(Debug)]
struct Watched {
    streams: usize,
    changes: broadcast::Sender<Kinds>,
    /// True once the watcher has read its baseline: a change after that
    /// is heard.
    ready: watch::Receiver<bool>,
    watcher: tokio::task::AbortHandle,
}

/// A stream's place in its human's budget, and what it hears; giving it
/// back (on drop) stops the watcher with the human's last stream.
struct Ticket {
    hub: Arc<LiveHub>,
    human_id: String,
    changes: broadcast::Receiver<Kinds>,
    ready: watch::Receiver<bool>,
}

impl LiveHub {
    /// How many streams `human_id` has open on this instance.
    pub fn streams_of(&self, human_id: &str) -> usize {
        self.locked().get(human_id).map_or(0, |w| w.streams)
    }

    fn locked(&self) -> std::sync::MutexGuard<'_, HashMap<String, Watched>> {
        self.humans.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for one more stream of `human_id`, starting the human's
    /// watcher with the first; `None` at [`MAX_LIVE_STREAMS_PER_HUMAN`].
    fn join(self: &Arc<Self>, state: &BoardState, human_id: &str) -> Option<Ticket> {
        let mut humans = self.locked();
        let watched = humans.entry(human_id.to_owned()).or_insert_with(|| {
            let (changes, _) = broadcast::channel(16);
            let (baseline, ready) = watch::channel(false);
            let watcher = tokio::spawn(watch_fleet(
                state.clone(),
                human_id.to_owned(),
                changes.clone(),
                baseline,
            ))
            .abort_handle();
            Watched {
                streams: 0,
                changes,
                ready,
                watcher,
            }
        });
        if watched.streams >= MAX_LIVE_STREAMS_PER_HUMAN {
            return None;
        }
        watched.streams += 1;
        Some(Ticket {
            hub: self.clone(),
            human_id: human_id.to_owned(),
            changes: watched.changes.subscribe(),
            ready: watched.ready.clone(),
        })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut humans = self.hub.locked();
        if let Some(watched) = humans.get_mut(&self.human_id) {
            watched.streams = watched.streams.saturating_sub(1);
            if watched.streams == 0 {
                watched.watcher.abort();
                humans.remove(&self.human_id);
            }
        }
    }
}

/// What a human's watcher keeps: the fleet as last read.
struct Watcher {
    state: BoardState,
    human_id: String,
    last: Fingerprint,
    changes: broadcast::Sender<Kinds>,
}

impl Watcher {
    /// Re-reads the fingerprint and tells every stream what changed.
    async fn look(&mut self) {
        if let Some(now) = fingerprint(&self.state, &self.human_id).await {
            // One event per look, naming every kind that changed: a page
            // refreshes once however much changed.
            let kinds = changes(&self.last, &now);
            if !kinds.is_empty() {
                let _ = self.changes.send(kinds.join(" ").into());
            }
            self.last = now;
        }
    }

    /// Whether a bus event may concern this human's endpoints.
    fn concerns(&self, event: &BusEvent) -> bool {
        let endpoint = match event {
            BusEvent::Gap => return true,
            BusEvent::Message(envelope) => match &envelope.message {
                Message::TodoReady { endpoint_id, .. }
                | Message::PresenceChanged { endpoint_id }
                | Message::TransitionClaimed { endpoint_id, .. }
                | Message::EndpointRevoked { endpoint_id }
                | Message::EndpointChanged { endpoint_id }
                | Message::HooksChanged { endpoint_id }
                | Message::ClaimsResumed { endpoint_id } => endpoint_id,
                Message::Keepalive => return false,
            },
        };
        self.last.ids.iter().any(|id| id == endpoint)
    }
}

/// One human's watcher: reads the fleet when a bus message names one of
/// its endpoints and every poll, says `tick` every tick, until the server
/// shuts down or the human's last stream is gone (aborted).
async fn watch_fleet(
    state: BoardState,
    human_id: String,
    changes: broadcast::Sender<Kinds>,
    baseline: watch::Sender<bool>,
) {
    let mut poll = interval(state.board.poll_every);
    poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut tick = interval(state.board.tick_every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // Both fire at once; the first look is the baseline, the first tick is skipped.
    poll.tick().await;
    tick.tick().await;
    let mut bus = state.delivery.bus().subscribe();
    let mut shutdown = state.board.shutdown.clone();
    let mut watcher = Watcher {
        last: fingerprint(&state, &human_id).await.unwrap_or_default(),
        state,
        human_id,
        changes,
    };
    let _ = baseline.send(true);
    loop {
        if *shutdown.borrow() {
            return;
        }
        tokio::select! {
            _ = shutdown.changed() => return,
            event = bus.next() => match event {
                Some(event) if watcher.concerns(&event) => watcher.look().await,
                Some(_) => {}
                // The bus is gone: polling alone still works.
                None => bus = Subscription::new(broadcast::channel(1).1),
            },
            _ = poll.tick() => watcher.look().await,
            _ = tick.tick() => {
                let _ = watcher.changes.send("tick".into());
            }
        }
    }
}

/// One stream: its human's changes, and its own session's liveness.
struct Live {
    state: BoardState,
    token_hash: String,
    ticket: Ticket,
    shutdown: watch::Receiver<bool>,
    poll: Interval,
    queue: VecDeque<Event>,
    /// The session ended: send what is queued, then end.
    ending: bool,
}

impl Live {
    /// The next event to send; `None` ends the stream.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            if self.ending || *self.shutdown.borrow() {
                return None;
            }
            tokio::select! {
                _ = self.shutdown.changed() => return None,
                heard = self.ticket.changes.recv() => match heard {
                    Ok(kinds) => self.queue.push_back(changed(&kinds)),
                    // Missed some: refresh everything once.
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        self.queue.push_back(changed("todos endpoints presence"));
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                _ = self.poll.tick() => {
                    // One indexed read: a revoked or expired session (or
                    // the token it was signed in with) ends its streams
                    // within a poll, and a last refresh takes the page to
                    // the sign-in form.
                    let live = self.state.store.authenticate_api_token(&self.token_hash).await;
                    if matches!(live, Ok(None)) {
                        self.queue.push_back(changed("signed-out"));
                        self.ending = true;
                    }
                }
            }
        }
    }
}

pub(crate) async fn events(
    State(state): State<BoardState>,
    signed: Signed,
    headers: HeaderMap,
) -> Response {
    let hub = state.board.live.clone();
    let Some(ticket) = hub.join(&state, &signed.human.id) else {
        let mut response = (
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "too many live pages: at most {MAX_LIVE_STREAMS_PER_HUMAN} per person; \
                 close a tab (this page still works, without live updates)\n"
            ),
        )
            .into_response();
        response.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from_static("15"),
        );
        return response;
    };
    // The first stream of a human waits for its watcher's baseline: a
    // change made once the page heard `connected` is a change.
    let mut ready = ticket.ready.clone();
    let _ = ready.wait_for(|ready| *ready).await;
    let token_hash = cookie(&headers, COOKIE).map(sha256_hex).unwrap_or_default();
    let mut poll = interval(state.board.poll_every);
    poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
    poll.tick().await;
    let mut live = Live {
        shutdown: state.board.shutdown.clone(),
        token_hash,
        ticket,
        poll,
        queue: VecDeque::new(),
        ending: false,
        state,
    };
    // A change between the page's render and this connection (or while a
    // dropped stream reconnected) is not lost: every page refreshes once.
    live.queue.push_back(changed("connected"));
    let stream = futures_util::stream::unfold(live, |mut live| async move {
        let event = live.next().await?;
        Some((Ok::<_, Infallible>(event), live))
    });
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response();
    response.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        "no-store".parse().expect("static"),
    );
    response
}
