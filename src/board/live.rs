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

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt::Write;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::watch;
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

struct Live {
    state: BoardState,
    human_id: String,
    token_hash: String,
    bus: Subscription,
    shutdown: watch::Receiver<bool>,
    last: Fingerprint,
    poll: Interval,
    tick: Interval,
    queue: VecDeque<Event>,
    /// The session ended: send what is queued, then end.
    ending: bool,
}

impl Live {
    /// Re-reads the fingerprint and queues an event per kind that changed.
    async fn look(&mut self) {
        if let Some(now) = fingerprint(&self.state, &self.human_id).await {
            // One event per look, naming every kind that changed: a page
            // refreshes once however much changed.
            let kinds = changes(&self.last, &now);
            if !kinds.is_empty() {
                self.queue.push_back(changed(&kinds.join(" ")));
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
                | Message::HooksChanged { endpoint_id } => endpoint_id,
                Message::Keepalive => return false,
            },
        };
        self.last.ids.iter().any(|id| id == endpoint)
    }

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
                event = self.bus.next() => match event {
                    Some(event) if self.concerns(&event) => self.look().await,
                    Some(_) => {}
                    // The bus is gone: polling alone still works.
                    None => self.bus = Subscription::new(tokio::sync::broadcast::channel(1).1),
                },
                _ = self.poll.tick() => {
                    // One indexed read: a revoked or expired session ends
                    // its streams within a poll, and a last refresh takes
                    // the page to the sign-in form.
                    let live = self.state.store.authenticate_api_token(&self.token_hash).await;
                    if matches!(live, Ok(None)) {
                        self.queue.push_back(changed("signed-out"));
                        self.ending = true;
                        continue;
                    }
                    self.look().await;
                }
                _ = self.tick.tick() => self.queue.push_back(changed("tick")),
            }
        }
    }
}

pub(crate) async fn events(
    State(state): State<BoardState>,
    signed: Signed,
    headers: HeaderMap,
) -> Response {
    let token_hash = cookie(&headers, COOKIE).map(sha256_hex).unwrap_or_default();
    let mut poll = interval(state.board.poll_every);
    poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut tick = interval(state.board.tick_every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // Both fire at once; the first look is the baseline, the first tick is skipped.
    poll.tick().await;
    tick.tick().await;
    let mut live = Live {
        bus: state.delivery.bus().subscribe(),
        shutdown: state.board.shutdown.clone(),
        human_id: signed.human.id.clone(),
        token_hash,
        last: Fingerprint::default(),
        poll,
        tick,
        queue: VecDeque::new(),
        ending: false,
        state,
    };
    live.last = fingerprint(&live.state, &live.human_id)
        .await
        .unwrap_or_default();
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
