//! `/`: one card per endpoint, totals on top, live.

use askama::Template;
use axum::extract::State;
use axum::response::Response;

use crate::board::BoardState;
use crate::board::auth::Signed;
use crate::board::error::BoardError;
use crate::board::view::{EndpointCard, Layout, all_endpoints, cards, render};

/// Sums over the human's endpoints, for the bar on top: `endpoints` is
/// every card shown, and working + idle + off + attention + revoked add up
/// to it (an `unheard` endpoint needs attention). The todo counts are the
/// cards' sums: pending + delayed + retrying + claimed + dead letters are
/// every live or dead todo the cards count.
#[derive(Default)]
pub(crate) struct Totals {
    pub(crate) endpoints: usize,
    pub(crate) revoked: usize,
    pub(crate) working: usize,
    pub(crate) idle: usize,
    pub(crate) off: usize,
    pub(crate) attention: usize,
    pub(crate) pending: i64,
    pub(crate) retrying: i64,
    pub(crate) delayed: i64,
    pub(crate) claimed: i64,
    pub(crate) dead_letters: i64,
}

impl Totals {
    fn of(cards: &[EndpointCard]) -> Self {
        let mut t = Totals {
            endpoints: cards.len(),
            ..Totals::default()
        };
        for c in cards {
            if !c.active {
                t.revoked += 1;
                continue;
            }
            match c.condition {
                "working" => t.working += 1,
                "idle" => t.idle += 1,
                "off" => t.off += 1,
                _ => t.attention += 1,
            }
        }
        for c in cards {
            t.pending += c.pending;
            t.retrying += c.retrying;
            t.delayed += c.delayed;
            t.claimed += c.claimed;
            t.dead_letters += c.dead_letters;
        }
        t
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn work_nobody_hears_sorts_with_what_needs_attention() {
        assert!(super::rank("unheard") < super::rank("stale"));
        assert!(super::rank("unheard") < super::rank("idle"));
    }
}

#[derive(Template)]
#[template(path = "board/overview.html")]
struct OverviewPage {
    layout: Layout,
    totals: Totals,
    cards: Vec<EndpointCard>,
}

pub(crate) async fn page(
    State(state): State<BoardState>,
    signed: Signed,
) -> Result<Response, BoardError> {
    let endpoints = all_endpoints(&state, &signed.human.id).await?;
    let mut cards = cards(&state, &endpoints).await?;
    // Active endpoints first; within them, what needs attention first.
    cards.sort_by_key(|c| {
        (
            !c.active,
            rank(c.condition),
            c.agent.clone(),
            c.slug.clone(),
        )
    });
    Ok(render(&OverviewPage {
        layout: Layout::new(&signed, "overview", "Overview"),
        totals: Totals::of(&cards),
        cards,
    }))
}

fn rank(condition: &str) -> u8 {
    match condition {
        "deaf" => 0,
        "unheard" => 1,
        "stale" => 2,
        "unknown" => 3,
        "working" => 4,
        "idle" => 5,
        "off" => 6,
        _ => 7,
    }
}
