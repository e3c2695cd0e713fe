//! `/board/endpoints/{slug}`: one endpoint — presence (toggle, until,
//! shift editor with a live preview), sessions, its todos, scope, and
//! revoke/delete.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::Response;

use super::refusal;
use super::todos::{TodoRow, dead_ids, rows};
use crate::board::BoardState;
use crate::board::auth::Signed;
use crate::board::error::BoardError;
use crate::board::form::CsrfForm;
use crate::board::view::{
    EndpointCard, Layout, Messages, When, back, cards, dated, relative, render, zone_of,
};
use crate::domain::duration::parse_positive_duration;
use crate::domain::intake::Decision;
use crate::domain::presence::Presence;
use crate::domain::shift::Shift;
use crate::ops;
use crate::store::{DeliveryFilter, Endpoint, PageRequest, TodoFilter};

/// The choices of the until picker: how long an override lasts.
pub(crate) const UNTIL_CHOICES: &[(&str, &str)] = &[
    ("", "until the next shift boundary"),
    ("30m", "for 30 minutes"),
    ("1h", "for 1 hour"),
    ("2h", "for 2 hours"),
    ("4h", "for 4 hours"),
    ("8h", "for 8 hours"),
    ("24h", "for 24 hours"),
];

#[derive(Template)]
#[template(path = "board/endpoint.html")]
struct EndpointPage {
    layout: Layout,
    card: EndpointCard,
    todos: Vec<TodoRow>,
    until_choices: &'static [(&'static str, &'static str)],
    /// The zone the until picker's time is read in.
    zone: String,
    preview: ShiftPreview,
    webhooks: Vec<WebhookRow>,
    revealed: Option<WebhookReveal>,
    hooks: Vec<HookRow>,
    oauth_clients: Vec<OAuthClientRow>,
    schedules: Vec<ScheduleRow>,
    quarantined: Vec<QuarantineRow>,
    /// The push form's one-time token (`ops::forms`).
    push_nonce: String,
}

/// A quarantined delivery to one of the endpoint's webhooks, waiting for a
/// human: its sender and what its todo would be titled.
pub(crate) struct QuarantineRow {
    pub(crate) id: String,
    pub(crate) when: When,
    pub(crate) sender: String,
    pub(crate) event: String,
    pub(crate) title: String,
}

/// Quarantined deliveries shown per endpoint (newest first, per webhook).
const QUARANTINE_SHOWN: i64 = 20;

/// One schedule of the endpoint (read-only here; `switchboard schedule` changes them).
pub(crate) struct ScheduleRow {
    pub(crate) id: String,
    pub(crate) cron: String,
    pub(crate) tz: String,
    pub(crate) queue: String,
    pub(crate) title: String,
    pub(crate) catch_up: String,
    pub(crate) paused: bool,
    /// The next occurrence in the schedule's zone, or `never`.
    pub(crate) next: String,
}

pub(crate) async fn page(
    State(state): State<BoardState>,
    signed: Signed,
    Path(slug): Path<String>,
    Query(messages): Query<Messages>,
) -> Result<Response, BoardError> {
    let endpoint = state.store.get_endpoint(&signed.human.id, &slug).await?;
    let layout = Layout::new(&signed, "overview", "").with_messages(&messages);
    show(&state, &signed, &endpoint, layout, None).await
}

/// The page, with a webhook's URL (and secret) revealed once when one was
/// just made or rotated.
async fn show(
    state: &BoardState,
    signed: &Signed,
    endpoint: &Endpoint,
    mut layout: Layout,
    revealed: Option<WebhookReveal>,
) -> Result<Response, BoardError> {
    let card = cards(state, std::slice::from_ref(endpoint))
        .await?
        .remove(0);
    let page = state
        .store
        .human_list_todos(
            &signed.human.id,
            &TodoFilter {
                endpoint_id: Some(endpoint.id.clone()),
                ..TodoFilter::default()
            },
            &PageRequest {
                limit: 50,
                after: None,
            },
        )
        .await?;
    let now = state.store.clock().now();
    let zone = zone_of(endpoint);
    let webhooks = state
        .store
        .list_webhooks(&signed.human.id, &endpoint.id)
        .await?
        .iter()
        .map(|w| WebhookRow {
            id: w.id.clone(),
            queue: w.queue.clone(),
            signed: w.signed,
            created: When::at(w.created_at, now, &zone),
            rotated: w.rotated_at.map(|t| When::at(t, now, &zone)),
        })
        .collect();
    let mut hooks = Vec::new();
    for h in state
        .store
        .list_hooks(&signed.human.id, &endpoint.id)
        .await?
    {
        let deliveries = state
            .store
            .list_hook_deliveries(&signed.human.id, &h.id, 3)
            .await?
            .into_iter()
            .map(|d| HookDeliveryRow {
                when: When::at(d.at, now, &zone),
                event: d.event,
                outcome: d.outcome,
                detail: match (d.status, d.error) {
                    (Some(status), _) => format!("HTTP {status}"),
                    (None, Some(error)) => error,
                    (None, None) => String::new(),
                },
                attempt: d.attempt,
            })
            .collect();
        hooks.push(HookRow {
            enabled: h.is_enabled(),
            failures: h.consecutive_failures,
            disabled: h
                .disabled_at
                .map(|t| When::at(t, now, &zone))
                .zip(h.disabled_reason.clone())
                .map(|(when, why)| format!("{} ({}): {why}", when.rel, when.abs)),
            id: h.id,
            url: h.url,
            deliveries,
        });
    }
    let oauth_clients = state
        .store
        .list_oauth_connections(&signed.human.id, &endpoint.id)
        .await?
        .into_iter()
        .map(|c| OAuthClientRow {
            id: c.grant.id,
            name: c.client.name.unwrap_or_else(|| c.client.id.clone()),
            client_id: c.client.id,
            verified: c.client.verified,
            created: When::at(c.grant.created_at, now, &zone),
            last_used: c.grant.last_used_at.map(|t| When::at(t, now, &zone)),
        })
        .collect();
    let mut quarantined = Vec::new();
    for webhook in state
        .store
        .list_webhooks(&signed.human.id, &endpoint.id)
        .await?
    {
        let held = state
            .store
            .list_deliveries(
                &signed.human.id,
                &webhook.id,
                &DeliveryFilter {
                    decision: Some(Decision::Quarantined),
                    ..DeliveryFilter::default()
                },
                &PageRequest {
                    limit: QUARANTINE_SHOWN,
                    after: None,
                },
            )
            .await?;
        quarantined.extend(held.items.into_iter().map(|d| QuarantineRow {
            when: When::at(d.received_at, now, &zone),
            sender: d.envelope.sender.unwrap_or_else(|| "unknown".into()),
            event: d.envelope.event.unwrap_or_default(),
            title: d.title.unwrap_or_default(),
            id: d.id,
        }));
    }
    let schedules = state
        .store
        .list_schedules(&signed.human.id, &endpoint.id)
        .await?
        .into_iter()
        .map(|s| ScheduleRow {
            next: match (
                s.next_at.as_millis() == i64::MAX,
                jiff::tz::TimeZone::get(&s.tz),
            ) {
                (true, _) => "never".to_owned(),
                (false, Ok(zone)) => {
                    format!("{} ({})", dated(s.next_at, &zone), relative(now, s.next_at))
                }
                (false, Err(_)) => s.next_at.to_rfc3339(),
            },
            id: s.id,
            cron: s.cron,
            tz: s.tz,
            queue: s.queue,
            title: s.title,
            catch_up: s.catch_up,
            paused: s.paused,
        })
        .collect();
    let preview = ShiftPreview::of(endpoint.shift.as_deref().unwrap_or(""), now);
    layout.title = format!("{} · {}", card.agent, card.slug);
    Ok(render(&EndpointPage {
        layout,
        todos: rows(
            &page.items,
            std::slice::from_ref(endpoint),
            &state
                .store
                .human_last_attempts(&signed.human.id, &dead_ids(&page.items))
                .await?,
            now,
        ),
        card,
        until_choices: UNTIL_CHOICES,
        zone: zone_of(endpoint).iana_name().unwrap_or("UTC").to_owned(),
        preview,
        webhooks,
        revealed,
        hooks,
        oauth_clients,
        schedules,
        quarantined,
        push_nonce: ops::forms::mint_nonce(),
    }))
}

/// The push form: a human's todo on one of the endpoint's queues (title,
/// queue, an optional JSON payload), through the one push operation. The
/// form's one-time token makes a second click answer with the todo the
/// first one pushed instead of pushing another.
pub(crate) async fn push(
    State(state): State<BoardState>,
    Path(slug): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let human = &form.signed.human.id;
    let endpoint = state.store.get_endpoint(human, &slug).await?;
    // The queue page's push form comes back to that queue's charts.
    let back_to = match form.fields.text("return") {
        Some("queues") => {
            let mut pairs = vec![("endpoint", endpoint.slug.as_str())];
            if let Some(queue) = form.fields.text("queue") {
                pairs.push(("queue", queue));
            }
            format!(
                "/board/queues?{}",
                serde_urlencoded::to_string(pairs).unwrap_or_default()
            )
        }
        _ => path_of(&endpoint.slug),
    };
    let priority = match form.fields.text("priority").map(str::parse::<i64>) {
        None => None,
        Some(Ok(n)) => Some(n),
        Some(Err(_)) => {
            return Ok(back(
                &back_to,
                Err("priority: must be a whole number".to_owned()),
            ));
        }
    };
    // Checked before the token is spent, so that a typo can be fixed and sent again.
    let payload = match form.fields.text("payload") {
        None => None,
        Some(text) => match serde_json::from_str::<serde_json::Value>(text) {
            Ok(value) => Some(value),
            Err(e) => return Ok(back(&back_to, Err(format!("payload: not JSON: {e}")))),
        },
    };
    let nonce = form.fields.text(ops::forms::NONCE_FIELD);
    match ops::forms::submit(&state.delivery, human, "push", nonce).await {
        Err(e) => return Ok(back(&back_to, Err(refusal(e)))),
        Ok(ops::forms::Submission::Repeat(prior)) => {
            let what = match prior.result {
                Some(id) => format!("it pushed {id} once"),
                None => "its first submission is still being handled".to_owned(),
            };
            return Ok(back(
                &back_to,
                Ok(format!("already submitted: {what}; nothing new was pushed")),
            ));
        }
        Ok(ops::forms::Submission::First) => {}
    }
    let request = ops::todos::Push {
        title: form.fields.get("title").unwrap_or("").trim().to_owned(),
        queue: form.fields.text("queue").map(str::to_owned),
        payload,
        priority,
        delay: form.fields.text("delay").map(str::to_owned),
        ..ops::todos::Push::default()
    };
    let outcome = match ops::todos::push(&state.delivery, human, &endpoint.id, request).await {
        Ok((_, created)) => {
            // The push happened whatever happens here (the failure is logged).
            if let Some(nonce) = nonce
                && let Err(e) =
                    ops::forms::settle(&state.delivery, human, nonce, &created.todo.id).await
            {
                refusal(e);
            }
            Ok(format!(
                "pushed {} ({}) to queue {}",
                created.todo.id, created.todo.title, created.todo.queue
            ))
        }
        Err(e) => Err(refusal(e)),
    };
    Ok(back(&back_to, outcome))
}

/// One notify hook of the endpoint, with its last deliveries.
pub(crate) struct HookRow {
    pub(crate) id: String,
    pub(crate) url: String,
    pub(crate) enabled: bool,
    pub(crate) failures: i64,
    /// When and why it was disabled.
    pub(crate) disabled: Option<String>,
    pub(crate) deliveries: Vec<HookDeliveryRow>,
}

/// One try of a hook delivery.
pub(crate) struct HookDeliveryRow {
    pub(crate) when: When,
    pub(crate) event: String,
    pub(crate) outcome: String,
    /// `HTTP 500`, or what went wrong.
    pub(crate) detail: String,
    pub(crate) attempt: i64,
}

/// An OAuth client connected to the endpoint.
pub(crate) struct OAuthClientRow {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) client_id: String,
    pub(crate) verified: bool,
    pub(crate) created: When,
    pub(crate) last_used: Option<When>,
}

/// Revokes an OAuth client's connection to the endpoint.
pub(crate) async fn revoke_oauth_client(
    State(state): State<BoardState>,
    Path((slug, id)): Path<(String, String)>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let human = &form.signed.human.id;
    let endpoint = state.store.get_endpoint(human, &slug).await?;
    let outcome = ops::oauth::revoke_connection(&state.delivery, human, &endpoint.id, &id)
        .await
        .map(|_| "client disconnected: its tokens no longer work".to_owned())
        .map_err(refusal);
    Ok(back(&path_of(&endpoint.slug), outcome))
}

/// Enables a hook again after it was disabled by failures.
pub(crate) async fn enable_hook(
    State(state): State<BoardState>,
    Path(id): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let human = &form.signed.human.id;
    let current = state.store.get_hook(human, &id).await?;
    let endpoint = state
        .store
        .get_endpoint(human, &current.endpoint_id)
        .await?;
    let outcome = ops::hooks::enable(&state.delivery, human, &id)
        .await
        .map(|_| "hook enabled: it is rung again".to_owned())
        .map_err(refusal);
    Ok(back(&path_of(&endpoint.slug), outcome))
}

/// Releases a quarantined delivery: its todo is created now, and rings.
pub(crate) async fn release_delivery(
    State(state): State<BoardState>,
    Path(id): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    settle_delivery(state, id, form, true).await
}

/// Discards a quarantined delivery: it stays in the history, no todo.
pub(crate) async fn discard_delivery(
    State(state): State<BoardState>,
    Path(id): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    settle_delivery(state, id, form, false).await
}

async fn settle_delivery(
    state: BoardState,
    id: String,
    form: CsrfForm,
    release: bool,
) -> Result<Response, BoardError> {
    let human = &form.signed.human.id;
    let record = state.store.get_delivery(human, &id).await?;
    let endpoint = state.store.get_endpoint(human, &record.endpoint_id).await?;
    let outcome = if release {
        ops::intake::release(&state.delivery, human, &id)
            .await
            .map(|_| "delivery released: its todo is created and rings".to_owned())
    } else {
        ops::intake::discard(&state.delivery, human, &id)
            .await
            .map(|_| "delivery discarded: it stays in the history".to_owned())
    };
    Ok(back(&path_of(&endpoint.slug), outcome.map_err(refusal)))
}

/// One intake webhook of the endpoint (its URL is never shown again).
pub(crate) struct WebhookRow {
    pub(crate) id: String,
    pub(crate) queue: String,
    pub(crate) signed: bool,
    pub(crate) created: When,
    pub(crate) rotated: Option<When>,
}

/// A webhook's new URL (and signing secret), shown once.
pub(crate) struct WebhookReveal {
    pub(crate) url: String,
    pub(crate) secret: Option<String>,
}

impl WebhookReveal {
    fn of(issued: ops::webhooks::IssuedWebhook) -> Self {
        Self {
            url: issued.ingest_url,
            secret: issued.signing_secret,
        }
    }
}

/// Creates a webhook on one of the endpoint's queues (`queue`; `signed`
/// for an HMAC-signed one) and reveals its URL once.
pub(crate) async fn create_webhook(
    State(state): State<BoardState>,
    Path(slug): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let signed = &form.signed;
    let endpoint = state.store.get_endpoint(&signed.human.id, &slug).await?;
    let queue = form.fields.text("queue").map(str::to_owned);
    let mut layout = Layout::new(signed, "overview", "");
    let created = ops::webhooks::create(
        &state.delivery,
        &state.board.public_url,
        &signed.human.id,
        &endpoint,
        queue,
        form.fields.get("signed").is_some(),
    )
    .await;
    let revealed = match created {
        Ok(issued) => {
            layout.notice = Some("webhook created: copy its URL now, it is not shown again".into());
            Some(WebhookReveal::of(issued))
        }
        Err(e) => {
            layout.error = Some(refusal(e));
            None
        }
    };
    show(&state, signed, &endpoint, layout, revealed).await
}

/// A new URL (and secret) for a webhook; the old ones stop working at once.
pub(crate) async fn rotate_webhook(
    State(state): State<BoardState>,
    Path(id): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let signed = &form.signed;
    let current = state.store.get_webhook(&signed.human.id, &id).await?;
    let endpoint = state
        .store
        .get_endpoint(&signed.human.id, &current.endpoint_id)
        .await?;
    let mut layout = Layout::new(signed, "overview", "");
    let rotated = ops::webhooks::rotate(
        &state.delivery,
        &state.board.public_url,
        &signed.human.id,
        &id,
    )
    .await;
    let revealed = match rotated {
        Ok(issued) => {
            layout.notice = Some("webhook rotated: the old URL no longer works".into());
            Some(WebhookReveal::of(issued))
        }
        Err(e) => {
            layout.error = Some(refusal(e));
            None
        }
    };
    show(&state, signed, &endpoint, layout, revealed).await
}

pub(crate) async fn delete_webhook(
    State(state): State<BoardState>,
    Path(id): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let human = &form.signed.human.id;
    let current = state.store.get_webhook(human, &id).await?;
    let endpoint = state
        .store
        .get_endpoint(human, &current.endpoint_id)
        .await?;
    let outcome = ops::webhooks::delete(&state.delivery, human, &id)
        .await
        .map(|()| "webhook deleted: its URL no longer works".to_owned())
        .map_err(refusal);
    Ok(back(&path_of(&endpoint.slug), outcome))
}

fn path_of(slug: &str) -> String {
    format!("/board/endpoints/{slug}")
}

/// Presence forms: `presence` = `in`, `out` or `clear`; `for` = one of
/// [`UNTIL_CHOICES`] (or any duration such as `90m`).
pub(crate) async fn set_presence(
    State(state): State<BoardState>,
    Path(slug): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let human = &form.signed.human.id;
    let endpoint = state.store.get_endpoint(human, &slug).await?;
    let back_to = path_of(&endpoint.slug);
    let now = state.store.clock().now();
    let choice = form.fields.text("presence").unwrap_or("");
    let outcome = if choice == "clear" {
        ops::presence::operator_clear(&state.delivery, &endpoint, human)
            .await
            .map(|_| "override cleared: the shift decides again".to_owned())
    } else {
        let Some(value) = Presence::parse(choice) else {
            return Ok(back(
                &back_to,
                Err("presence: must be in, out or clear".into()),
            ));
        };
        // An exact time (`until`, in the endpoint's zone) wins over a duration (`for`).
        let until = match (form.fields.text("until"), form.fields.text("for")) {
            (Some(local), _) => match local_instant(local, &zone_of(&endpoint)) {
                Ok(t) => Some(t),
                Err(e) => return Ok(back(&back_to, Err(e))),
            },
            (None, Some(text)) => match parse_positive_duration(text, "for") {
                Ok(d) => Some(now.saturating_add(d)),
                Err(e) => return Ok(back(&back_to, Err(e.to_string()))),
            },
            (None, None) => None,
        };
        ops::presence::operator_set(&state.delivery, &endpoint, human, value, until)
            .await
            .map(|_| format!("presence set to {}", value.as_str()))
    };
    Ok(back(&back_to, outcome.map_err(refusal)))
}

/// A `datetime-local` value (`2026-12-01T18:30`) as an instant in `zone`.
fn local_instant(
    text: &str,
    zone: &jiff::tz::TimeZone,
) -> Result<crate::domain::Timestamp, String> {
    let civil: jiff::civil::DateTime = text
        .parse()
        .map_err(|_| format!("until: {text:?} is not a date and time such as 2026-12-01T18:30"))?;
    let zoned = civil
        .to_zoned_datetime(zone.clone())
        .map_err(|_| format!("until: {text:?} does not exist in that time zone"))?;
    Ok(crate::domain::Timestamp::from_millis(
        zoned.timestamp().as_millisecond(),
    ))
}

/// The shift editor's submit: `shift` (empty clears it).
pub(crate) async fn set_shift(
    State(state): State<BoardState>,
    Path(slug): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let human = &form.signed.human.id;
    let endpoint = state.store.get_endpoint(human, &slug).await?;
    let text = form.fields.text("shift");
    let outcome = ops::presence::operator_set_shift(&state.delivery, &endpoint, human, text)
        .await
        .map(|_| match text {
            Some(_) => "shift saved".to_owned(),
            None => "shift cleared".to_owned(),
        });
    Ok(back(&path_of(&endpoint.slug), outcome.map_err(refusal)))
}

/// The endpoint's default lease: `default_lease_ttl_seconds` (60–86 400;
/// empty returns to the server's 300 s).
pub(crate) async fn set_lease(
    State(state): State<BoardState>,
    Path(slug): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let endpoint = state
        .store
        .get_endpoint(&form.signed.human.id, &slug)
        .await?;
    let back_to = path_of(&endpoint.slug);
    let seconds = match form.fields.text("default_lease_ttl_seconds") {
        None => None,
        Some(text) => match text.parse::<i64>() {
            Ok(n) => Some(n),
            Err(_) => {
                return Ok(back(
                    &back_to,
                    Err("default_lease_ttl_seconds: a whole number of seconds, or empty".into()),
                ));
            }
        },
    };
    let outcome = ops::endpoints::set_default_lease(&state.delivery, &endpoint.id, seconds)
        .await
        .map(|e| format!("default lease: {} s", e.effective_lease_seconds()))
        .map_err(refusal);
    Ok(back(&back_to, outcome))
}

/// Revoking needs the slug typed again (`confirm`), with or without JavaScript.
pub(crate) async fn revoke(
    State(state): State<BoardState>,
    Path(slug): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let human = &form.signed.human.id;
    let endpoint = state.store.get_endpoint(human, &slug).await?;
    let back_to = path_of(&endpoint.slug);
    if form.fields.text("confirm") != Some(endpoint.slug.as_str()) {
        return Ok(back(
            &back_to,
            Err("confirm: type the endpoint's slug to revoke it".into()),
        ));
    }
    let outcome = match ops::endpoints::revoke(&state.delivery, human, &endpoint).await {
        Ok(revoked) => Ok(format!(
            "revoked; {} live todo(s) became dead letters",
            revoked.dead_lettered
        )),
        Err(e) => Err(refusal(e)),
    };
    Ok(back(&back_to, outcome))
}

/// Deleting (a revoked endpoint only) needs the slug typed again too.
pub(crate) async fn delete(
    State(state): State<BoardState>,
    Path(slug): Path<String>,
    form: CsrfForm,
) -> Result<Response, BoardError> {
    let human = &form.signed.human.id;
    let endpoint = state.store.get_endpoint(human, &slug).await?;
    if form.fields.text("confirm") != Some(endpoint.slug.as_str()) {
        return Ok(back(
            &path_of(&endpoint.slug),
            Err("confirm: type the endpoint's slug to delete it".into()),
        ));
    }
    match ops::endpoints::delete(&state.delivery, human, &endpoint.id).await {
        Ok(()) => Ok(back("/", Ok(format!("endpoint {} deleted", endpoint.slug)))),
        Err(e) => Ok(back(&path_of(&endpoint.slug), Err(refusal(e)))),
    }
}

/// What the shift editor shows under the field: the canonical form and the
/// next boundaries in the shift's zone, or why the text is not a shift.
#[derive(Template)]
#[template(path = "board/shift_preview.html")]
pub(crate) struct ShiftPreview {
    pub(crate) empty: bool,
    pub(crate) error: Option<String>,
    pub(crate) canonical: String,
    pub(crate) zone: String,
    pub(crate) now_in: bool,
    /// (local time, UTC instant, turns in)
    pub(crate) boundaries: Vec<(String, String, bool)>,
}

impl ShiftPreview {
    pub(crate) fn of(text: &str, now: crate::domain::Timestamp) -> Self {
        let mut preview = ShiftPreview {
            empty: text.trim().is_empty(),
            error: None,
            canonical: String::new(),
            zone: String::new(),
            now_in: false,
            boundaries: Vec::new(),
        };
        if preview.empty {
            return preview;
        }
        match Shift::parse(text) {
            Err(e) => preview.error = Some(e.to_string()),
            Ok(shift) => {
                preview.canonical = shift.canonical();
                preview.zone = shift.zone_name().to_owned();
                preview.now_in = shift.contains(now);
                preview.boundaries = shift
                    .next_boundaries(now, 4)
                    .into_iter()
                    .map(|b| {
                        (
                            dated(b, shift.time_zone()),
                            b.to_rfc3339(),
                            shift.contains(b),
                        )
                    })
                    .collect();
            }
        }
        preview
    }
}

#[derive(serde::Deserialize)]
pub(crate) struct PreviewQuery {
    #[serde(default)]
    shift: String,
}

/// `GET /board/shift-preview?shift=…`: the preview fragment, as the editor
/// types (htmx), validated by the same grammar the API uses.
pub(crate) async fn shift_preview(
    State(state): State<BoardState>,
    _signed: Signed,
    Query(q): Query<PreviewQuery>,
) -> Response {
    render(&ShiftPreview::of(&q.shift, state.store.clock().now()))
}
