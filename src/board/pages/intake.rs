//! `/board/webhooks/{id}`: one webhook's delivery history — every delivery
//! with its decision, sender, event and the rule that decided, filtered by
//! decision, event and sender (`docs/intake.md`, "Delivery history").

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde::Deserialize;

use crate::board::BoardState;
use crate::board::auth::Signed;
use crate::board::error::BoardError;
use crate::board::view::{Layout, relative, render};
use crate::domain::intake::Decision;
use crate::store::{DeliveryFilter, PageRequest, StoreError};

/// Deliveries shown per page.
const PAGE: i64 = 100;

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Filters {
    #[serde(default)]
    decision: String,
    #[serde(default)]
    event: String,
    #[serde(default)]
    sender: String,
    #[serde(default)]
    cursor: String,
}

impl Filters {
    fn to_filter(&self) -> Result<DeliveryFilter, String> {
        let decision = match self.decision.as_str() {
            "" => None,
            text => Some(Decision::parse_field(text, "decision").map_err(|e| e.to_string())?),
        };
        let text = |s: &str| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
        Ok(DeliveryFilter {
            decision,
            event: text(&self.event),
            sender: text(&self.sender),
        })
    }

    /// The filters as a query string, for the next page's link.
    fn query(&self) -> String {
        serde_urlencoded::to_string([
            ("decision", self.decision.as_str()),
            ("event", self.event.as_str()),
            ("sender", self.sender.as_str()),
        ])
        .unwrap_or_default()
    }
}

/// One delivery of the history.
struct DeliveryRow {
    id: String,
    when: String,
    when_exact: String,
    decision: &'static str,
    event: String,
    sender: String,
    title: String,
    /// The rule that decided, or why it was refused.
    why: String,
    todo: Option<String>,
}

#[derive(Template)]
#[template(path = "board/intake.html")]
struct IntakePage {
    layout: Layout,
    webhook_id: String,
    endpoint: String,
    queue: String,
    decisions: Vec<&'static str>,
    decision: String,
    event: String,
    sender: String,
    rows: Vec<DeliveryRow>,
    next: Option<String>,
}

pub(crate) async fn page(
    State(state): State<BoardState>,
    signed: Signed,
    Path(id): Path<String>,
    Query(filters): Query<Filters>,
) -> Result<Response, BoardError> {
    let human = &signed.human.id;
    let webhook = state.store.get_webhook(human, &id).await?;
    let endpoint = state
        .store
        .get_endpoint(human, &webhook.endpoint_id)
        .await?;
    let mut layout = Layout::new(
        &signed,
        "endpoints",
        format!("Deliveries · {}", endpoint.slug),
    );
    let now = state.store.clock().now();
    let (rows, next) = match filters.to_filter() {
        Err(e) => {
            layout.error = Some(e);
            (Vec::new(), None)
        }
        Ok(filter) => {
            let page = state
                .store
                .list_deliveries(
                    human,
                    &webhook.id,
                    &filter,
                    &PageRequest {
                        limit: PAGE,
                        after: Some(filters.cursor.clone()).filter(|c| !c.is_empty()),
                    },
                )
                .await;
            match page {
                Ok(page) => (
                    page.items
                        .into_iter()
                        .map(|d| DeliveryRow {
                            when: relative(now, d.received_at),
                            when_exact: d.received_at.to_rfc3339(),
                            decision: d.decision.as_str(),
                            event: [d.envelope.event, d.envelope.action]
                                .into_iter()
                                .flatten()
                                .collect::<Vec<_>>()
                                .join(" · "),
                            sender: d.envelope.sender.unwrap_or_default(),
                            title: d.title.unwrap_or_default(),
                            why: d.rule.or(d.reason).unwrap_or_default(),
                            todo: d.todo_id,
                            id: d.id,
                        })
                        .collect(),
                    page.next_cursor,
                ),
                // A stale cursor is bad input, not an outage.
                Err(StoreError::InvalidArgument(e)) => {
                    layout.error = Some(e.to_string());
                    (Vec::new(), None)
                }
                Err(e) => return Err(e.into()),
            }
        }
    };
    let next = next.map(|cursor| {
        format!(
            "/board/webhooks/{}?{}&{}",
            webhook.id,
            filters.query(),
            serde_urlencoded::to_string([("cursor", cursor.as_str())]).unwrap_or_default()
        )
    });
    Ok(render(&IntakePage {
        layout,
        webhook_id: webhook.id,
        endpoint: endpoint.slug,
        queue: webhook.queue,
        decisions: Decision::ALL.iter().map(|d| d.as_str()).collect(),
        decision: filters.decision,
        event: filters.event,
        sender: filters.sender,
        rows,
        next,
    }))
}
