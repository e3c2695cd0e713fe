//! The statement texts of the queue's transitions, each written once: the
//! generic transaction path (`todos/`), PostgreSQL's one-statement forms
//! (`postgres/`), SQLite's writer-thread jobs (`sqlite/`) and the
//! benchmarks all take their SQL from here. A change to what is claimable
//! (a pause, a priority, a delay) is made in this file and reaches every
//! path at once.
//!
//! Placeholders are `$n` (sqlx accepts them on both dialects; the SQLite
//! writer thread numbers them `?n`). The few texts that differ by dialect
//! take a [`Dialect`].

use std::sync::LazyLock;

use crate::domain::todo::{Disposition, MAX_PRIORITY, Outcome};
use crate::store::dialect::Dialect;
use crate::store::rows::{attempt_columns, todo_columns};

/// The columns a claim sets; `$1` now, `$2` owner, `$3` lease expiry, `$4`
/// fence hash. A claim under an in-flight limit also takes a slot
/// ([`free_slot`]).
fn claim_set(dialect: Dialect) -> String {
    claim_set_of(
        ["$1", "$2", "$3", "$4"],
        [
            &free_slot(dialect, SlotLevel::Endpoint),
            &free_slot(dialect, SlotLevel::Queue),
        ],
    )
}

/// What a claim sets, the holder's values given as expressions (now,
/// owner, lease expiry, fence hash) and its two slots: one text whether a
/// claim is bound alone or joined from a batch ([`claim_pending_batch`]).
fn claim_set_of(
    [now, owner, expires, fence]: [&str; 4],
    [endpoint_slot, queue_slot]: [&str; 2],
) -> String {
    format!(
        "state = 'claimed', owner = {owner}, lease_expires_at = {expires}, \
         lease_token_hash = {fence}, attempt = attempt + 1, attempts_total = attempts_total + 1, \
         claimed_at = {now}, updated_at = {now}, next_retry_at = NULL, last_note = NULL, \
         endpoint_slot = {endpoint_slot}, queue_slot = {queue_slot}"
    )
}

/// The order a claim takes pending todos in: the highest priority, then the
/// oldest. The pending indexes are keyed this way (migration 0017).
pub const CLAIM_ORDER: &str = "priority DESC, created_at, id";

/// How many rowids each priority's band holds on SQLite
/// ([`sqlite_priority_band`]): 2^40, more todos than one priority will see.
const SQLITE_BAND_BITS: u32 = 40;

/// On SQLite, the first rowid of the band a todo of priority `priority` (an
/// SQL expression) is stored in. SQLite keeps a table's rows in rowid order,
/// and claims take them in [`CLAIM_ORDER`]: with rowids handed out in
/// arrival order, a backlog of mixed priorities puts the todos claimed one
/// after another ten or a hundred rows apart, so every claim and every
/// complete writes a page of its own (B10: ~7 µs of the writer a loop, most
/// of it in the commit's WAL frames). Banding the rowid by priority keeps
/// each priority's todos in arrival order side by side, as one priority's
/// are. Each priority in ±[`MAX_PRIORITY`] has a band of its own, all
/// above the rowids (below 2^40) given before bands existed; a priority out
/// of range (never written: it is validated first) would share an edge band.
/// Only where the rows lie changes: nothing reads the rowid.
pub fn sqlite_priority_band(priority: &str) -> String {
    format!(
        "((MIN(MAX({priority}, -{MAX_PRIORITY}), {MAX_PRIORITY}) + {offset}) << {SQLITE_BAND_BITS})",
        offset = MAX_PRIORITY + 1,
    )
}

/// On SQLite, the rowid a new todo of priority `priority` takes: one past
/// the last in its band ([`sqlite_priority_band`]), read with one seek.
/// SQLite has one writer at a time, so two inserts cannot read the same
/// last rowid.
fn sqlite_next_rowid(priority: &str) -> String {
    let band = sqlite_priority_band(priority);
    format!(
        "(SELECT COALESCE(MAX(rowid), {band}) + 1 FROM todos \
           WHERE rowid >= {band} AND rowid < {band} + (1 << {SQLITE_BAND_BITS}))"
    )
}

/// Inserts a todo, `ON CONFLICT DO NOTHING` (a live todo holds its
/// idempotency key), returning its row: `$1` id, `$2` endpoint, `$3` queue,
/// `$4` title, `$5` kind, `$6` source, `$7` payload, `$8` idempotency key,
/// `$9` intake event, `$10` max attempts, `$11` now, `$12` priority, `$13`
/// state (`pending` or `delayed`), `$14` run_at. On SQLite the todo's rowid
/// is placed in its priority's band ([`sqlite_priority_band`]).
pub fn insert_todo(dialect: Dialect) -> &'static str {
    &INSERT_TODO[dialect_index(dialect)]
}

static INSERT_TODO: LazyLock<[String; 2]> = LazyLock::new(|| {
    [Dialect::Sqlite, Dialect::Postgres].map(|dialect| {
        let (rowid_column, rowid) = match dialect {
            Dialect::Sqlite => ("rowid, ", format!("{}, ", sqlite_next_rowid("$12"))),
            Dialect::Postgres => ("", String::new()),
        };
        format!(
            concat!(
                "INSERT INTO todos ({rowid_column}id, endpoint_id, queue, title, kind, source, ",
                "payload, idempotency_key, event_id, state, max_attempts, created_at, ",
                "updated_at, priority, run_at) ",
                "VALUES ({rowid}$1, $2, $3, $4, $5, $6, $7, $8, $9, $13, $10, $11, $11, $12, $14) ",
                "ON CONFLICT DO NOTHING RETURNING ",
                todo_columns!()
            ),
            rowid_column = rowid_column,
            rowid = rowid,
        )
    })
});

/// What a takeover may claim besides a pending todo: a lapsed lease or an
/// elapsed retry window, below the attempt cap. `$1` is now.
pub const TAKEOVER_CONDITION: &str = concat!(
    below_attempt_cap!(),
    " AND ((",
    lapsed_lease!(),
    ") OR (",
    elapsed_retry!(),
    "))"
);

/// Whether admission lets the todo in `todos` be claimed now (`$1`): neither
/// its endpoint (`queue = ''`) nor its queue is paused, at its in-flight
/// limit (the todo itself not counted, so a lapsed lease can be taken over
/// at the limit), or out of its window's claims; a limit of 0 pauses
/// (`docs/queue.md`, "Admission"). The window's count is charged by
/// [`charge_window`] in the claim's own statement or transaction, the
/// in-flight limit is held across instances by the slots the claim takes;
/// what this condition read before another instance's claim committed is
/// caught by those two and the claim read again.
fn admitted(dialect: Dialect) -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM admission a WHERE a.endpoint_id = todos.endpoint_id \
           AND a.queue IN ('', todos.queue) AND {held})",
        held = level_held(dialect, "a.endpoint_id", Some("todos.id")),
    )
}

/// Whether a level's row `a` of endpoint `endpoint` holds claims now (`$1`):
/// paused (or a limit of 0), at its in-flight limit (live claims other than
/// `other`, when given), or out of its window's claims: no shard of the
/// running window has room. The shards' shares add up to the budget and
/// none counts past its share, so that is the same as their sum reaching
/// the budget, and the read stops at the first shard with room instead of
/// adding up all of them (B10: 16 rows a claim on PostgreSQL).
fn level_held(dialect: Dialect, endpoint: &str, other: Option<&str>) -> String {
    let not_other = other.map_or(String::new(), |id| format!(" AND f.id <> {id}"));
    format!(
        "(a.paused = 1 \
           OR (a.max_in_flight IS NOT NULL AND a.max_in_flight <= (SELECT count(*) FROM {claimed} \
             WHERE f.endpoint_id = {endpoint} AND f.state = 'claimed'{not_other} \
             AND (a.queue = '' OR f.queue = a.queue))) \
           OR a.max_claims_per_window = 0 \
           OR (a.max_claims_per_window IS NOT NULL AND a.window_started_at + a.window_ms > $1 \
             AND NOT EXISTS (SELECT 1 FROM admission_windows s WHERE s.endpoint_id = a.endpoint_id \
               AND s.queue = a.queue AND {room})))",
        claimed = indexed(dialect, "f", "todos_claimed_by_endpoint"),
        room = shard_has_room(dialect, "s", "a", "a.window_started_at"),
    )
}

/// The claims charged to the running window of level row `level`: the sum
/// of its shards' counts for that window ([`charge_window`]).
pub fn window_claims(level: &str) -> String {
    format!(
        "(SELECT CAST(COALESCE(sum(s.claims), 0) AS BIGINT) FROM admission_windows s \
           WHERE s.endpoint_id = {level}.endpoint_id AND s.queue = {level}.queue \
           AND s.window_started_at = {level}.window_started_at)"
    )
}

/// How many shard rows a level's window count is spread over. PostgreSQL's
/// concurrent claims of one endpoint each charge a shard of their own rather
/// than wait on one row for each other's commits (B10); SQLite's one writer
/// runs one claim at a time and needs one.
pub fn window_shards(dialect: Dialect) -> i64 {
    match dialect {
        Dialect::Sqlite => 1,
        Dialect::Postgres => 16,
    }
}

/// Shard `shard`'s share of level `level`'s budget, as
/// `domain::admission::shard_share` computes it.
fn shard_share(dialect: Dialect, level: &str, shard: &str) -> String {
    let n = window_shards(dialect);
    format!(
        "({level}.max_claims_per_window / {n} \
           + CASE WHEN {shard} < {level}.max_claims_per_window % {n} THEN 1 ELSE 0 END)"
    )
}

/// Whether shard row `s` may take one more claim of the window that level
/// `level` says starts at `start`: its count is of an older window (a fresh
/// one starts at this claim) or below its share. A shard already counting a
/// newer window than `start` (another claim rolled the window after this
/// one read it) has no room here.
fn shard_has_room(dialect: Dialect, s: &str, level: &str, start: &str) -> String {
    let share = shard_share(dialect, level, &format!("{s}.shard"));
    format!(
        "{share} > 0 AND ({s}.window_started_at IS NULL OR {s}.window_started_at < {start} \
           OR ({s}.window_started_at = {start} AND {s}.claims < {share}))"
    )
}

/// The shard a claim of todo `todo_id` charges: the first with room at or
/// after one picked by the todo's id, wrapping round, so concurrent claims
/// rarely pick the same one (as [`spread_free_slot`]), and one not locked by
/// a claim still charging it. The picked shard is tried alone first: it
/// nearly always has room, and one key lookup costs less than reading and
/// ordering every shard (B10). PostgreSQL only: SQLite's one shard needs
/// no pick.
fn pick_shard(level: &str, start: &str, todo_id: &str) -> String {
    let pg = Dialect::Postgres;
    let n = window_shards(pg);
    let picked = format!("(hashtext({todo_id}) & 2147483647) % {n}");
    let order = format!("(p.shard + {n} - {picked}) % {n}");
    let same_level = format!("p.endpoint_id = {level}.endpoint_id AND p.queue = {level}.queue");
    let room = shard_has_room(pg, "p", level, start);
    // A shard another claim has charged stays locked until that claim
    // commits: the first two tries pass over shards being charged, so a
    // claim waits for another's commit only when every shard with room is
    // (the third, which the charge's own update then waits on and
    // re-checks). The first try marks its shard with a transaction-scoped
    // advisory lock rather than a row lock: a row lock is a WAL record and a
    // write to the shard's page on every claim (B10, window alone: ~50 bytes
    // of WAL a claim less). Correctness never rests on either lock: the
    // charge's update is guarded by the shard's room and re-checks it after
    // any wait. Two levels whose keys hash alike only pass over each
    // other's shards now and then.
    format!(
        "COALESCE((SELECT p.shard FROM admission_windows p WHERE {same_level} \
           AND p.shard = {picked} AND {room} \
           AND pg_try_advisory_xact_lock(hashtext(p.endpoint_id || '/' || p.queue), \
             CAST(p.shard AS INTEGER))), \
         (SELECT p.shard FROM admission_windows p WHERE {same_level} AND {room} \
           ORDER BY {order} LIMIT 1 FOR UPDATE SKIP LOCKED), \
         (SELECT p.shard FROM admission_windows p WHERE {same_level} AND {room} \
           ORDER BY {order} LIMIT 1))"
    )
}

/// [`admitted`] for the pending claim of endpoint `$5`, written so that it
/// does not depend on the candidate row: the endpoint's own hold is one
/// `NOT EXISTS`, the held queues one `NOT IN` list, each computed once per
/// statement. Written per row (as [`admitted`]), PostgreSQL planned the claim
/// with one admission row as an anti join over every pending todo of the
/// endpoint and a sort (430–580 ms a claim, B10); this way the claim still
/// reads the head of the pending index. A pending candidate holds no live
/// claim, so none needs leaving out of the counts.
fn admitted_pending(dialect: Dialect) -> String {
    let held = level_held(dialect, "$5", None);
    let held_queues = format!("admission a WHERE a.endpoint_id = $5 AND a.queue <> '' AND {held}");
    let queue_admitted = match dialect {
        Dialect::Postgres => format!("queue NOT IN (SELECT a.queue FROM {held_queues})"),
        // SQLite builds the list as a temporary b-tree on every run of the
        // statement, held queues or not (~1.5 µs of the writer's time a
        // claim, B10): it is built only when some queue is held, which one
        // `NOT EXISTS`, run once a statement, tells first.
        Dialect::Sqlite => format!(
            "(NOT EXISTS (SELECT 1 FROM {held_queues}) \
              OR queue NOT IN (SELECT a.queue FROM {held_queues}))"
        ),
    };
    format!(
        "NOT EXISTS (SELECT 1 FROM admission a WHERE a.endpoint_id = $5 AND a.queue = '' \
           AND {held}) \
         AND {queue_admitted}"
    )
}

/// Whether any level of endpoint `endpoint` (its own or a queue's) has a
/// limit that [`level_held`] could hold a claim by: paused, an in-flight
/// limit, or a window budget. Without one, every pending todo of the
/// endpoint is admitted, and claims need no slot and charge no window.
fn has_limits(endpoint: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM admission a WHERE a.endpoint_id = {endpoint} \
           AND (a.paused = 1 OR a.max_in_flight IS NOT NULL OR a.max_claims_per_window IS NOT NULL))"
    )
}

/// `todos AS alias`, told its index on SQLite: it has no statistics and
/// could otherwise serve the read from the listings' index, walking the
/// endpoint's whole history.
fn indexed(dialect: Dialect, alias: &str, index: &str) -> String {
    match dialect {
        Dialect::Sqlite => format!("todos AS {alias} INDEXED BY {index}"),
        Dialect::Postgres => format!("todos AS {alias}"),
    }
}

/// The todo in `todos` is not paused: neither its endpoint nor its queue
/// (a limit of 0 pauses too). A paused todo is not rung either
/// (`rings.rs`); resuming sends one digest instead.
pub const NOT_PAUSED: &str = "NOT EXISTS (SELECT 1 FROM admission p \
     WHERE p.endpoint_id = todos.endpoint_id AND p.queue IN ('', todos.queue) \
     AND (p.paused = 1 OR p.max_in_flight = 0 OR p.max_claims_per_window = 0))";

/// Where an in-flight limit applies.
#[derive(Debug, Clone, Copy)]
enum SlotLevel {
    Endpoint,
    Queue,
}

/// An in-flight slot free in the todo's endpoint or queue, when that level
/// has an in-flight limit; else NULL. Free: no other live claim holds it.
/// While fewer claims than the limit are live, a free slot within the limit
/// exists. Two claims that read the slots at once and pick the same one
/// collide on the slot's unique index (migration 0017), so the later one
/// fails and is read again instead of exceeding the limit.
fn free_slot(dialect: Dialect, level: SlotLevel) -> String {
    let (column, admission_queue) = match level {
        SlotLevel::Endpoint => ("endpoint_slot", "''"),
        SlotLevel::Queue => ("queue_slot", "todos.queue"),
    };
    let same_queue = |alias: &str| match level {
        SlotLevel::Endpoint => String::new(),
        SlotLevel::Queue => format!(" AND {alias}.queue = todos.queue"),
    };
    match dialect {
        Dialect::Postgres => spread_free_slot(column, admission_queue, &same_queue("g")),
        // SQLite has one writer at a time: the claim's own count is exact,
        // and no race needs a slot to catch it (B10: taking one cost the
        // writer ~18 µs a claim).
        Dialect::Sqlite => "NULL".to_owned(),
    }
}

/// PostgreSQL's [`free_slot`]: a free slot among the few at and after one
/// picked by the todo's id, else the lowest free one. Concurrent claims of
/// different todos then rarely pick the same slot; taking the lowest free
/// one, they nearly always did, and most lost the race on the unique index
/// and had to be read again (654 retries per 1 000 claims at c = 4, B10).
/// SQLite's single writer has no such race and keeps the lowest free slot.
///
/// One read of the level's row serves both tries (no row: no limit, NULL),
/// and the first try's series is short: PostgreSQL builds a function's
/// whole series before the first row is read, and a series to the limit
/// cost every claim hundreds of rows (B10, a limit of 1 000).
///
/// Each slot is looked up by its key in the slot's unique index (`OFFSET 0`
/// keeps the `NOT EXISTS` a subquery per slot): as an anti join, PostgreSQL
/// read and kept every live claim's slot of the endpoint for each try, a
/// join and a materialization to set up on every claim, and a scan of
/// every live slot per slot tried when the limit is nearly full.
fn spread_free_slot(column: &str, admission_queue: &str, g_queue: &str) -> String {
    let first_free = |series: &str| {
        format!(
            "(SELECT n FROM generate_series({series}) AS n \
               WHERE NOT EXISTS (SELECT 1 FROM todos g WHERE g.endpoint_id = todos.endpoint_id{g_queue} \
                 AND g.state = 'claimed' AND g.{column} IS NOT NULL AND g.{column} = n \
                 AND g.id <> todos.id OFFSET 0) LIMIT 1)"
        )
    };
    let picked = "1 + (hashtext(todos.id) & 2147483647) % GREATEST(l.max_in_flight, 1)";
    format!(
        "(SELECT COALESCE({spread}, {lowest}) FROM admission l \
           WHERE l.endpoint_id = todos.endpoint_id AND l.queue = {admission_queue} \
           AND l.max_in_flight IS NOT NULL)",
        spread = first_free(&format!(
            "{picked}, LEAST({picked} + {SPREAD_TRIES} - 1, l.max_in_flight)"
        )),
        lowest = first_free("1, l.max_in_flight"),
    )
}

/// How many slots from the picked one a claim tries before it looks for
/// the lowest free one.
const SPREAD_TRIES: i64 = 8;

/// The level rows `alias` of a todo in queue `queue`: its endpoint's
/// (`queue = ''`) and its queue's. PostgreSQL seeks both keys. SQLite
/// builds a temporary b-tree for an `IN` list on every run of the
/// statement (and turns `queue = '' OR queue = …` into that same `IN`), which
/// cost ~1 µs of the writer's time a statement (B10, the writer's time by
/// statement): there the endpoint's few level rows are read by the key's
/// first column and the queue compared by an expression (`+`), which no
/// rewrite touches.
fn level_of(dialect: Dialect, alias: &str, queue: &str) -> String {
    match dialect {
        Dialect::Postgres => format!("{alias}.queue IN ('', {queue})"),
        Dialect::Sqlite => format!("({alias}.queue = '' OR +{alias}.queue = {queue})"),
    }
}

/// Level row `level` has a window budget.
fn windowed(level: &str) -> String {
    format!("{level}.max_claims_per_window IS NOT NULL AND {level}.window_ms IS NOT NULL")
}

/// Level row `level`'s window has ended by `now` (or never began): the next
/// claim starts a new one.
fn window_ended(level: &str, now: &str) -> String {
    format!(
        "({level}.window_started_at IS NULL OR {level}.window_started_at + {level}.window_ms <= {now})"
    )
}

/// Starts a new window at this claim (`$1` now) on the levels of endpoint
/// `$2` and queue `$3` whose window has ended (or never began). The
/// window's start is on the level's `admission` row, written once per
/// window; the claims are counted in its shards ([`charge_window`]).
pub fn roll_window(dialect: Dialect) -> &'static str {
    &ROLL_WINDOW[dialect_index(dialect)]
}

static ROLL_WINDOW: LazyLock<[String; 2]> = LazyLock::new(|| {
    [Dialect::Sqlite, Dialect::Postgres].map(|dialect| {
        format!(
            "UPDATE admission SET window_started_at = $1 \
             WHERE admission.endpoint_id = $2 AND {level} AND {windowed} AND {ended}",
            level = level_of(dialect, "admission", "$3"),
            windowed = windowed("admission"),
            ended = window_ended("admission", "$1"),
        )
    })
});

/// The levels of endpoint `$1` and queue `$2` with a window budget
/// (`levels`): how many shards [`charge_window`] must charge; and of them,
/// those whose window has ended by `$3` (`ended`): what [`roll_window`]
/// would start anew. A claim with no level skips the roll and the charge;
/// on SQLite's one writer, a claim with none ended skips the roll (it
/// would find nothing to do until the window ends, ~2 µs a claim).
pub fn window_levels(dialect: Dialect) -> &'static str {
    &WINDOW_LEVELS[dialect_index(dialect)]
}

static WINDOW_LEVELS: LazyLock<[String; 2]> = LazyLock::new(|| {
    [Dialect::Sqlite, Dialect::Postgres].map(|dialect| {
        format!(
            "SELECT count(*) AS levels, \
               COALESCE(sum(CASE WHEN {ended} THEN 1 ELSE 0 END), 0) AS ended \
             FROM admission l WHERE l.endpoint_id = $1 AND {level} AND {windowed}",
            level = level_of(dialect, "l", "$2"),
            windowed = windowed("l"),
            ended = window_ended("l", "$3"),
        )
    })
});

/// Charges a claim of todo `$4` (PostgreSQL; SQLite's one shard needs no
/// pick) to one shard of its endpoint's (`$2`) and
/// queue's (`$3`) windows, after [`roll_window`]: one row returned per
/// level charged. Fewer rows than [`window_levels`] means another claim
/// spent the shards' room after this one read it: the claim is undone and
/// read again (on PostgreSQL's fused claim, [`OVER_BUDGET`]).
pub fn charge_window(dialect: Dialect) -> &'static str {
    &CHARGE_WINDOW[dialect_index(dialect)]
}

static CHARGE_WINDOW: LazyLock<[String; 2]> = LazyLock::new(|| {
    let levels = |dialect| {
        format!(
            "l.endpoint_id = $2 AND {level} AND {windowed}",
            level = level_of(dialect, "l", "$3"),
            windowed = windowed("l"),
        )
    };
    [
        // SQLite's one shard needs no pick: the charge joins its level.
        format!(
            "UPDATE admission_windows SET {charge} FROM admission l WHERE {levels} \
               AND admission_windows.endpoint_id = l.endpoint_id \
               AND admission_windows.queue = l.queue AND admission_windows.shard = 0 \
               AND {room} RETURNING admission_windows.queue",
            levels = levels(Dialect::Sqlite),
            charge = shard_charge("l.window_started_at"),
            room = shard_has_room(
                Dialect::Sqlite,
                "admission_windows",
                "l",
                "l.window_started_at"
            ),
        ),
        format!(
            "WITH ws AS MATERIALIZED (SELECT l.endpoint_id, l.queue, l.max_claims_per_window, \
               l.window_started_at, {pick} AS shard FROM admission l WHERE {levels}) {charge}",
            levels = levels(Dialect::Postgres),
            pick = pick_shard("l", "l.window_started_at", "$4"),
            charge = charge_picked_shards("ws"),
        ),
    ]
});

/// [`charge_window`] on SQLite's writer thread, which runs one claim at a
/// time: the claim it charges read the window's room in the same
/// transaction, so the charge cannot miss and reads nothing back. Shard
/// rows exist only for levels with a window budget (`admission.rs`,
/// `respread_window`), so the shard's key alone picks the levels to charge.
/// With no subquery in its `WHERE`, SQLite updates in one pass; a
/// `RETURNING`, an `UPDATE … FROM` or any subquery there (a room check)
/// makes it build a temporary b-tree on every run (B10: 2.8 → 1.1 µs of
/// the writer's time a claim). `$1` now (unread, bound as for [`charge_window`]), `$2`
/// endpoint, `$3` queue.
pub static CHARGE_WINDOW_ON_ONE_WRITER: LazyLock<String> = LazyLock::new(|| {
    let start = "(SELECT l.window_started_at FROM admission l \
                 WHERE l.endpoint_id = admission_windows.endpoint_id \
                 AND l.queue = admission_windows.queue)";
    format!(
        "UPDATE admission_windows SET \
           claims = CASE WHEN window_started_at = {start} THEN claims + 1 ELSE 1 END, \
           window_started_at = {start} \
         WHERE endpoint_id = $2 AND {same_level} AND shard = 0",
        same_level = level_of(Dialect::Sqlite, "admission_windows", "$3"),
    )
});

/// Charges the shards picked in `ws` (one row per level: the level's key,
/// `max_claims_per_window`, `window_started_at` and the picked `shard`),
/// each guarded by its room; returns one row per shard charged. The pick
/// is made once, before the charge, and the shard row found by its key:
/// picked inside the charge's join condition, PostgreSQL hashed every
/// shard row of the table and ran the pick twice a claim (B10, limits
/// alone: +117 µs of server CPU a loop over no limits before, +100 after).
fn charge_picked_shards(ws: &str) -> String {
    format!(
        "UPDATE admission_windows SET {charge} FROM {ws} \
           WHERE admission_windows.endpoint_id = {ws}.endpoint_id \
           AND admission_windows.queue = {ws}.queue AND admission_windows.shard = {ws}.shard \
           AND {room} RETURNING admission_windows.queue",
        charge = shard_charge(&format!("{ws}.window_started_at")),
        room = shard_has_room(
            Dialect::Postgres,
            "admission_windows",
            ws,
            &format!("{ws}.window_started_at")
        ),
    )
}

/// One more claim on shard row `admission_windows`, in the window starting
/// at `start`: a count of an older window starts anew.
fn shard_charge(start: &str) -> String {
    format!(
        "claims = CASE WHEN admission_windows.window_started_at = {start} \
           THEN admission_windows.claims + 1 ELSE 1 END, window_started_at = {start}"
    )
}

/// The SQLSTATE PostgreSQL's fused claim raises when its window charge went
/// over the limit (`switchboard_over_budget()`, migration 0017).
pub const OVER_BUDGET: &str = "SB001";

/// The SQLSTATE of a unique violation: two claims picked the same in-flight
/// slot.
pub const SLOT_TAKEN: &str = "23505";

/// The SQLSTATE of a deadlock PostgreSQL broke by ending one of its
/// statements: a batch of claims inserts several rows' slots, and a lone
/// claim's two slots (the endpoint's, then the queue's) can each wait on
/// the other's entries.
pub const DEADLOCK: &str = "40P01";

/// Where a claim looks: the endpoint's whole scope, or one named queue
/// (bound as `$6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimScope {
    AnyQueue,
    OneQueue,
}

impl ClaimScope {
    pub fn of(queue: Option<&str>) -> Self {
        match queue {
            Some(_) => Self::OneQueue,
            None => Self::AnyQueue,
        }
    }

    /// The queue condition, after the endpoint's. Todos exist only in scope
    /// queues, so the whole scope needs none (and uses the endpoint index).
    fn filter(self) -> &'static str {
        match self {
            Self::AnyQueue => "",
            Self::OneQueue => " AND queue = $6",
        }
    }

    /// The lone claim's claimant parameter: after the claim's own (`$6`,
    /// or `$7` with a named queue).
    fn claimant(self) -> usize {
        match self {
            Self::AnyQueue => 6,
            Self::OneQueue => 7,
        }
    }

    fn index(self) -> usize {
        match self {
            Self::AnyQueue => 0,
            Self::OneQueue => 1,
        }
    }
}

fn dialect_index(dialect: Dialect) -> usize {
    match dialect {
        Dialect::Sqlite => 0,
        Dialect::Postgres => 1,
    }
}

fn claim_pending_text(dialect: Dialect, scope: ClaimScope) -> String {
    format!(
        concat!(
            "UPDATE todos SET {set} WHERE id = (SELECT id FROM {from} ",
            "WHERE endpoint_id = $5 AND state = 'pending'{filter} AND {admitted} ",
            "ORDER BY {order} LIMIT 1{skip}) RETURNING ",
            todo_columns!()
        ),
        set = claim_set(dialect),
        // A named queue's claim takes the per-queue pending index by itself;
        // the whole scope's names its index on SQLite
        // (`Dialect::pending_todos_by_endpoint`).
        from = match scope {
            ClaimScope::AnyQueue => dialect.pending_todos_by_endpoint(),
            ClaimScope::OneQueue => "todos",
        },
        filter = scope.filter(),
        admitted = admitted_pending(dialect),
        order = CLAIM_ORDER,
        skip = dialect.skip_locked(),
    )
}

static CLAIM_PENDING: LazyLock<[[String; 2]; 2]> = LazyLock::new(|| {
    [Dialect::Sqlite, Dialect::Postgres]
        .map(|d| [ClaimScope::AnyQueue, ClaimScope::OneQueue].map(|s| claim_pending_text(d, s)))
});

/// The claim of the first pending todo in claim order ([`CLAIM_ORDER`]) of
/// endpoint `$5` (and queue `$6`) that admission lets in: `$1` now, `$2`
/// owner, `$3` lease expiry, `$4` fence hash. Returns the claimed row, or
/// nothing when nothing is pending and admitted.
pub fn claim_pending(dialect: Dialect, scope: ClaimScope) -> &'static str {
    &CLAIM_PENDING[dialect_index(dialect)][scope.index()]
}

static CLAIM_PENDING_WITH_ATTEMPT: LazyLock<[String; 2]> = LazyLock::new(|| {
    let pg = Dialect::Postgres;
    [ClaimScope::AnyQueue, ClaimScope::OneQueue].map(|scope| {
        format!(
            concat!(
                "WITH c AS ({claim}), a AS (INSERT INTO todo_attempts ",
                "(todo_id, seq, attempt, claimant, claimed_at) ",
                "SELECT id, attempts_total, attempt, ${claimant}, $1 FROM c), ",
                "{windows} SELECT ",
                todo_columns!(),
                " FROM c WHERE CASE WHEN (SELECT count(*) FROM w) < (SELECT count(*) FROM lv) ",
                "OR (SELECT count(*) FROM r) < (SELECT count(*) FROM lv WHERE lv.rolls) ",
                "THEN switchboard_over_budget() ELSE 0 END = 0"
            ),
            claim = claim_pending(pg, scope),
            claimant = scope.claimant(),
            windows = CHARGE_CLAIMED_WINDOW.as_str(),
        )
    })
});

/// [`roll_window`] and [`charge_window`] for the todo claimed in the CTE
/// `c`, as CTEs: `lv` the levels with a window (`rolls` when this claim
/// starts a new one), `r` the windows rolled, `ws` the shard each level
/// charges, `w` the shards charged. All read one snapshot, so a window
/// another claim rolled or a shard another claim filled in the meantime
/// shows as a row missing from `r` or `w` ([`charge_picked_shards`]).
static CHARGE_CLAIMED_WINDOW: LazyLock<String> = LazyLock::new(|| {
    let ended = window_ended("l", "$1");
    format!(
        "lv AS (SELECT l.endpoint_id, l.queue, l.max_claims_per_window, {ended} AS rolls, \
           CASE WHEN {ended} THEN $1 ELSE l.window_started_at END AS window_started_at, \
           c.id AS todo_id \
         FROM admission l JOIN c ON l.endpoint_id = c.endpoint_id AND l.queue IN ('', c.queue) \
         WHERE {windowed}), \
         r AS (UPDATE admission SET window_started_at = $1 FROM lv \
           WHERE lv.rolls AND admission.endpoint_id = lv.endpoint_id \
           AND admission.queue = lv.queue AND {admission_ended} \
           RETURNING admission.queue), \
         ws AS MATERIALIZED (SELECT lv.endpoint_id, lv.queue, lv.max_claims_per_window, \
           lv.window_started_at, {pick} AS shard FROM lv), \
         w AS ({charge})",
        windowed = windowed("l"),
        admission_ended = window_ended("admission", "$1"),
        pick = pick_shard("lv", "lv.window_started_at", "lv.todo_id"),
        charge = charge_picked_shards("ws"),
    )
});

/// PostgreSQL: [`claim_pending`], its attempt record ([`OPEN_ATTEMPT`]) and
/// its window charge as one data-modifying statement; the claimant is the
/// parameter after the claim's own (`$6`, or `$7` with a named queue). A
/// charge over the window's limit fails the whole statement
/// ([`OVER_BUDGET`]).
pub fn claim_pending_with_attempt(scope: ClaimScope) -> &'static str {
    &CLAIM_PENDING_WITH_ATTEMPT[scope.index()]
}

static CLAIM_UNLIMITED: LazyLock<[String; 2]> = LazyLock::new(|| {
    [ClaimScope::AnyQueue, ClaimScope::OneQueue].map(|scope| {
        format!(
            concat!(
                "WITH lim AS (SELECT {limited} AS limited), ",
                "c AS (UPDATE todos SET {set} WHERE id = (SELECT id FROM todos ",
                "WHERE endpoint_id = $5 AND state = 'pending'{filter} ",
                "AND NOT (SELECT limited FROM lim) ",
                "ORDER BY {order} LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING ",
                todo_columns!(),
                "), a AS (INSERT INTO todo_attempts (todo_id, seq, attempt, claimant, claimed_at) ",
                "SELECT id, attempts_total, attempt, ${claimant}, $1 FROM c) ",
                "SELECT lim.limited, c.* FROM lim LEFT JOIN c ON true"
            ),
            limited = has_limits("$5"),
            set = claim_set_of(["$1", "$2", "$3", "$4"], ["NULL", "NULL"]),
            filter = scope.filter(),
            order = CLAIM_ORDER,
            claimant = scope.claimant(),
        )
    })
});

/// PostgreSQL: [`claim_pending_with_attempt`] for an endpoint without
/// admission limits ([`has_limits`]), same parameters: the claim and its
/// attempt record, without the admission checks, slots and window charge
/// that the full text plans and starts on every run whether an endpoint has
/// limits or not (a lone claim's backend CPU 187 → 120 µs, lab). Under
/// limits it claims nothing. Returns one row: `limited`, and the claimed
/// todo's columns (NULL when it claimed nothing).
pub fn claim_pending_unlimited(scope: ClaimScope) -> &'static str {
    &CLAIM_UNLIMITED[scope.index()]
}

static COMPLETE_THEN_CLAIM: LazyLock<[String; 2]> = LazyLock::new(|| {
    [ClaimScope::AnyQueue, ClaimScope::OneQueue].map(|scope| {
        let claimant = scope.claimant();
        let held = |n: usize| format!("${}", claimant + n);
        format!(
            concat!(
                "WITH d AS (UPDATE todos SET {done} WHERE {guard} RETURNING ",
                todo_columns!(),
                "), da AS (UPDATE todo_attempts SET ended_at = $1, outcome = '{outcome}', ",
                "disposition = '{disposition}', summary = {summary}, summary_truncated = {truncated} ",
                "WHERE todo_id = (SELECT id FROM d) AND ended_at IS NULL), ",
                "lim AS (SELECT {limited} AS limited), ",
                "c AS (UPDATE todos SET {set} WHERE id = (SELECT id FROM todos ",
                "WHERE endpoint_id = $5 AND state = 'pending'{filter} ",
                "AND EXISTS (SELECT 1 FROM d) AND NOT (SELECT limited FROM lim) ",
                "ORDER BY {order} LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING ",
                todo_columns!(),
                "), a AS (INSERT INTO todo_attempts (todo_id, seq, attempt, claimant, claimed_at) ",
                "SELECT id, attempts_total, attempt, ${claimant}, $1 FROM c) ",
                "SELECT true AS done, lim.limited, d.* FROM d, lim ",
                "UNION ALL SELECT false, lim.limited, c.* FROM c, lim"
            ),
            done = complete_set(&held(1), "$1"),
            guard = qualified_holder_guard("", &held(2), "$5", "$2", &held(3)),
            outcome = Outcome::Completed.as_str(),
            disposition = Disposition::Done.as_str(),
            summary = held(4),
            truncated = held(5),
            limited = has_limits("$5"),
            set = claim_set_of(["$1", "$2", "$3", "$4"], ["NULL", "NULL"]),
            filter = scope.filter(),
            order = CLAIM_ORDER,
            claimant = claimant,
        )
    })
});

static COMPLETE_THEN_CLAIM_BATCH: LazyLock<[String; 2]> = LazyLock::new(|| {
    [ClaimScope::AnyQueue, ClaimScope::OneQueue].map(|scope| {
        format!(
            concat!(
                "WITH i AS (SELECT * FROM json_to_recordset($1::json) AS i(n bigint, id text, ",
                "owner text, fence text, result text, now bigint, summary text, truncated bigint, ",
                "expires bigint, new_fence text, claimant text)), ",
                "d AS (UPDATE todos SET {done} FROM i WHERE {guard} ",
                "RETURNING todos.*, i.n AS holder), ",
                "da AS (UPDATE todo_attempts SET ended_at = i.now, outcome = '{outcome}', ",
                "disposition = '{disposition}', summary = i.summary, summary_truncated = i.truncated ",
                "FROM d JOIN i ON i.n = d.holder ",
                "WHERE todo_attempts.todo_id = d.id AND todo_attempts.ended_at IS NULL), ",
                "lim AS (SELECT {limited} AS limited), ",
                // The holders whose completion matched, in order, each take
                // the next pending todo in claim order.
                "m AS (SELECT holder, row_number() OVER (ORDER BY holder) AS k FROM d), ",
                "k AS (SELECT p.id, row_number() OVER (ORDER BY {order}) AS k FROM (",
                "SELECT id, priority, created_at FROM todos ",
                "WHERE endpoint_id = $2 AND state = 'pending'{filter} ",
                "AND NOT (SELECT limited FROM lim) ",
                "ORDER BY {order} LIMIT (SELECT count(*) FROM d) FOR UPDATE SKIP LOCKED) p), ",
                "c AS (UPDATE todos SET {set} FROM k JOIN m ON m.k = k.k JOIN i ON i.n = m.holder ",
                "WHERE todos.id = k.id AND todos.id = ANY (ARRAY(SELECT id FROM k)) ",
                "RETURNING todos.*, i.n AS holder, i.claimant AS holder_claimant), ",
                "a AS (INSERT INTO todo_attempts (todo_id, seq, attempt, claimant, claimed_at) ",
                "SELECT id, attempts_total, attempt, holder_claimant, claimed_at FROM c) ",
                "SELECT true AS done, lim.limited, holder, ",
                todo_columns!(),
                " FROM d, lim UNION ALL SELECT false, lim.limited, holder, ",
                todo_columns!(),
                " FROM c, lim"
            ),
            done = complete_set("i.result", "i.now"),
            guard = qualified_holder_guard("todos.", "i.id", "$2", "i.owner", "i.fence"),
            outcome = Outcome::Completed.as_str(),
            disposition = Disposition::Done.as_str(),
            limited = has_limits("$2"),
            order = CLAIM_ORDER,
            filter = match scope {
                ClaimScope::AnyQueue => "",
                ClaimScope::OneQueue => " AND queue = $3",
            },
            set = claim_set_of(["i.now", "i.owner", "i.expires", "i.new_fence"], ["NULL", "NULL"]),
        )
    })
});

/// PostgreSQL: [`complete_then_claim_unlimited`] for several holders of one
/// endpoint (and named queue) at once, one statement and one commit (group
/// commit, `postgres/claims.rs`). `$1` is a JSON array with one object per
/// holder: `n` (1, 2, …), the completion's `id`, `owner`, `fence` (the
/// presented token's hash or null), `result`, `now`, `summary`, `truncated`
/// (0/1), and the claim's `expires`, `new_fence` and `claimant`; `$2` the
/// endpoint (`$3` the queue). Each completion is held to its own guard; the
/// holders whose completion matched take the next pending todos in claim
/// order, one each, in holder order. Returns, per holder, its completed row
/// (`done` true) and its claimed one (`done` false), each with `holder` and
/// `limited`. Under limits it completes and claims nothing.
pub fn complete_then_claim_batch(scope: ClaimScope) -> &'static str {
    &COMPLETE_THEN_CLAIM_BATCH[scope.index()]
}

/// PostgreSQL: the holder's `complete` ([`finish_with_attempt`]) and, once
/// it matched, [`claim_pending_unlimited`] for the same endpoint, in one
/// statement and one commit (the agent's loop, `complete` with `next`).
/// Parameters: the claim's, as [`claim_pending_unlimited`] takes them (the
/// holder's owner is the claimant's, `$2`; its endpoint `$5`), then the
/// completion's: result, the todo, the presented fence's hash, the
/// attempt's summary and whether it was cut. Returns the completed row
/// (`done` true) and the claimed one (`done` false), each with `limited`;
/// no row when the holder's guard matched nothing (then nothing was
/// claimed either). Under limits it completes and claims nothing.
pub fn complete_then_claim_unlimited(scope: ClaimScope) -> &'static str {
    &COMPLETE_THEN_CLAIM[scope.index()]
}

static CLAIM_PENDING_BATCH: LazyLock<[String; 2]> =
    LazyLock::new(|| {
        [ClaimScope::AnyQueue, ClaimScope::OneQueue].map(|scope| {
        format!(
            concat!(
                "WITH i AS (SELECT * FROM json_to_recordset($1::json) AS i(n bigint, now bigint, ",
                "owner text, expires bigint, fence text, claimant text)), ",
                "lim AS (SELECT {limited} AS limited), ",
                "k AS (SELECT p.id, row_number() OVER (ORDER BY {order}) AS n FROM (",
                "SELECT id, priority, created_at FROM todos ",
                "WHERE endpoint_id = $2 AND state = 'pending'{filter} ",
                "AND NOT (SELECT limited FROM lim) ",
                "ORDER BY {order} LIMIT $3 FOR UPDATE SKIP LOCKED) p), ",
                // The ids as an array too: joined by key alone, PostgreSQL
                // merge-joined the batch with the primary key from its start,
                // a walk over every todo before the ones claimed.
                "c AS (UPDATE todos SET {set} FROM k JOIN i ON i.n = k.n WHERE todos.id = k.id ",
                "AND todos.id = ANY (ARRAY(SELECT id FROM k)) ",
                "RETURNING todos.*, i.n AS holder, i.claimant AS holder_claimant), ",
                "a AS (INSERT INTO todo_attempts (todo_id, seq, attempt, claimant, claimed_at) ",
                "SELECT id, attempts_total, attempt, holder_claimant, claimed_at FROM c) ",
                "SELECT lim.limited, c.holder, ",
                todo_columns!(),
                " FROM lim LEFT JOIN c ON true"
            ),
            limited = has_limits("$2"),
            order = CLAIM_ORDER,
            filter = match scope {
                ClaimScope::AnyQueue => "",
                ClaimScope::OneQueue => " AND queue = $4",
            },
            set = claim_set_of(["i.now", "i.owner", "i.expires", "i.fence"], ["NULL", "NULL"]),
        )
    })
    });

/// PostgreSQL: the pending claims of several callers of endpoint `$2` (and
/// queue `$4`) as one statement and one commit (group commit,
/// `postgres/claims.rs`): the next `$3` pending todos in claim order, the
/// n-th to the n-th holder of the JSON array `$1` (`n` from 1, `now`,
/// `owner`, `expires`, `fence`, `claimant`), each with its attempt record.
/// Only for an endpoint without admission limits ([`has_limits`]): under
/// limits it claims nothing. Returns `limited` and, per todo claimed, its
/// `holder` and row; one row with a NULL holder when it claimed nothing.
pub fn claim_pending_batch(scope: ClaimScope) -> &'static str {
    &CLAIM_PENDING_BATCH[scope.index()]
}

/// PostgreSQL: [`claim_pending_batch`] for an endpoint under admission
/// limits: the next `$3` pending todos of endpoint `$5` (and queue `$6`),
/// the n-th to the n-th holder of the JSON array `$2` (as
/// [`claim_pending_batch`]), each with its attempt record, its in-flight
/// slots and the window charge, in one statement — if admission at `$1`
/// (the batch's now) lets them in as a whole: all in one queue, neither
/// level paused, each in-flight limit with room for all of them, each
/// window a shard with room for all of them (charged by their number), and
/// the levels with an in-flight limit a free slot for each among the first
/// `$4` + rows from a picked one. Else it claims nothing (`admitted` false)
/// and its callers run alone, where admission decides claim by claim
/// ([`admitted_pending`]); the batch reads the levels once instead. A slot or a
/// shard another claim took meanwhile fails the whole statement (the
/// slots' unique indexes; [`OVER_BUDGET`]), and its callers run alone too.
/// Returns `admitted` and, per todo claimed, its `holder` and row.
pub fn claim_admitted_batch(scope: ClaimScope) -> &'static str {
    &CLAIM_ADMITTED_BATCH[scope.index()]
}

static CLAIM_ADMITTED_BATCH: LazyLock<[String; 2]> = LazyLock::new(|| {
    let pg = Dialect::Postgres;
    // The level row `l` has a window, and it has ended by the batch's now.
    let windowed = windowed("l");
    let ended = window_ended("l", "$1");
    // Free slots at the level of `column`, as one array, from one picked by
    // the first candidate's id, among the rows' number + `$4`: the n-th row
    // takes the n-th. An array rather than numbered rows joined to the
    // todos: the numbering (a window function and its sort) and the joins
    // (two hash tables) cost every batch more to set up than they did to run
    // (B10, PostgreSQL: ~12 % of the batch's CPU). Any order will do: the
    // slots are distinct (fewer than the limit, taken modulo it).
    let free_slots = |column: &str, level: &str, same_queue: &str| {
        format!(
            "SELECT ARRAY(SELECT x.slot FROM lv l, q, \
               LATERAL (SELECT 1 + ((hashtext(q.seed) & 2147483647) + o) % l.max_in_flight AS slot \
                 FROM generate_series(0, LEAST(l.max_in_flight, q.m + $4) - 1) AS o) x \
               WHERE {level} AND l.max_in_flight IS NOT NULL \
               AND NOT EXISTS (SELECT 1 FROM todos g WHERE g.endpoint_id = $5{same_queue} \
                 AND g.state = 'claimed' AND g.{column} IS NOT NULL AND g.{column} = x.slot)) AS slots"
        )
    };
    // Shard row `p` of level `lv` has room for all the batch's rows.
    let room = shard_has_room_for("p", "lv", "lv.window_started_at", "q.m");
    let n = window_shards(pg);
    let picked = format!("(hashtext(q.seed) & 2147483647) % {n}");
    let same_level = "p.endpoint_id = lv.endpoint_id AND p.queue = lv.queue";
    // As a lone claim's pick ([`pick_shard`]): the picked shard first,
    // marked by an advisory lock (no WAL record), then the first with room
    // not being charged. Not, as a lone claim, any with room (waiting for its
    // charge to commit): when every shard with room is being charged, the
    // batch is not admitted and its callers run alone, which wait.
    let shard_picked = format!(
        "(SELECT p.shard FROM admission_windows p WHERE {same_level} AND p.shard = {picked} \
           AND {room} AND pg_try_advisory_xact_lock(hashtext(p.endpoint_id || '/' || p.queue), \
             CAST(p.shard AS INTEGER)))"
    );
    let shard_unlocked = format!(
        "(SELECT p.shard FROM admission_windows p WHERE {same_level} AND {room} \
           ORDER BY (p.shard + {n} - {picked}) % {n} LIMIT 1 FOR UPDATE SKIP LOCKED)"
    );
    [ClaimScope::AnyQueue, ClaimScope::OneQueue].map(|scope| {
        format!(
            concat!(
                "WITH i AS (SELECT * FROM json_to_recordset($2::json) AS i(n bigint, now bigint, ",
                "owner text, expires bigint, fence text, claimant text)), ",
                "k AS MATERIALIZED (SELECT p.id, p.queue, row_number() OVER (ORDER BY {order}) AS n ",
                "FROM (SELECT id, queue, priority, created_at FROM todos ",
                "WHERE endpoint_id = $5 AND state = 'pending'{filter} ",
                "ORDER BY {order} LIMIT $3 FOR UPDATE SKIP LOCKED) p), ",
                "q AS MATERIALIZED (SELECT min(queue) AS queue, min(queue) = max(queue) AS one_queue, ",
                "count(*) AS m, min(id) AS seed FROM k), ",
                "lv AS MATERIALIZED (SELECT l.endpoint_id, l.queue, l.paused, l.max_in_flight, ",
                "l.max_claims_per_window, {windowed} AS windowed, {windowed} AND {ended} AS rolls, ",
                "CASE WHEN {ended} THEN $1 ELSE l.window_started_at END AS window_started_at, ",
                "CASE WHEN l.max_in_flight IS NULL THEN 0 ELSE (SELECT count(*) FROM todos f ",
                "WHERE f.endpoint_id = $5 AND f.state = 'claimed' ",
                "AND (l.queue = '' OR f.queue = l.queue)) END AS live ",
                "FROM admission l, q WHERE l.endpoint_id = $5 AND l.queue IN ('', q.queue)), ",
                "se AS MATERIALIZED ({endpoint_slots}), ",
                "sq AS MATERIALIZED ({queue_slots}), ",
                "ws AS MATERIALIZED (SELECT lv.endpoint_id, lv.queue, lv.window_started_at, ",
                "lv.max_claims_per_window, lv.rolls, ",
                "COALESCE({shard_picked}, {shard_unlocked}) AS shard ",
                "FROM lv, q WHERE lv.windowed), ",
                "ok AS MATERIALIZED (SELECT q.m > 0 AND q.one_queue ",
                "AND NOT EXISTS (SELECT 1 FROM lv WHERE lv.paused = 1 OR lv.max_in_flight = 0 ",
                "OR lv.max_claims_per_window = 0) ",
                "AND NOT EXISTS (SELECT 1 FROM lv WHERE lv.max_in_flight IS NOT NULL ",
                "AND lv.live + q.m > lv.max_in_flight) ",
                "AND NOT EXISTS (SELECT 1 FROM ws WHERE ws.shard IS NULL) ",
                "AND cardinality((SELECT slots FROM se)) >= CASE WHEN EXISTS (SELECT 1 FROM lv ",
                "WHERE lv.queue = '' AND lv.max_in_flight IS NOT NULL) THEN q.m ELSE 0 END ",
                "AND cardinality((SELECT slots FROM sq)) >= CASE WHEN EXISTS (SELECT 1 FROM lv ",
                "WHERE lv.queue <> '' AND lv.max_in_flight IS NOT NULL) THEN q.m ELSE 0 END ",
                "AS admitted FROM q), ",
                // The ids as an array too, as in the batch without limits.
                "c AS (UPDATE todos SET {set} FROM k JOIN i ON i.n = k.n, se, sq ",
                "WHERE todos.id = k.id AND todos.id = ANY (ARRAY(SELECT id FROM k)) ",
                "AND (SELECT admitted FROM ok) ",
                "RETURNING todos.*, i.n AS holder, i.claimant AS holder_claimant), ",
                "a AS (INSERT INTO todo_attempts (todo_id, seq, attempt, claimant, claimed_at) ",
                "SELECT id, attempts_total, attempt, holder_claimant, claimed_at FROM c), ",
                "r AS (UPDATE admission SET window_started_at = $1 FROM ws ",
                "WHERE ws.rolls AND (SELECT admitted FROM ok) ",
                "AND admission.endpoint_id = ws.endpoint_id AND admission.queue = ws.queue ",
                "AND {admission_ended} RETURNING admission.queue), ",
                "w AS (UPDATE admission_windows SET ",
                "claims = CASE WHEN admission_windows.window_started_at = ws.window_started_at ",
                "THEN admission_windows.claims + (SELECT m FROM q) ELSE (SELECT m FROM q) END, ",
                "window_started_at = ws.window_started_at FROM ws, q ",
                "WHERE (SELECT admitted FROM ok) AND admission_windows.endpoint_id = ws.endpoint_id ",
                "AND admission_windows.queue = ws.queue AND admission_windows.shard = ws.shard ",
                "AND {charged_room} RETURNING admission_windows.queue) ",
                "SELECT ok.admitted, c.holder, ",
                todo_columns!(),
                " FROM ok LEFT JOIN c ON true ",
                "WHERE CASE WHEN ok.admitted AND ((SELECT count(*) FROM w) < (SELECT count(*) FROM ws) ",
                "OR (SELECT count(*) FROM r) < (SELECT count(*) FROM ws WHERE ws.rolls)) ",
                "THEN switchboard_over_budget() ELSE 0 END = 0"
            ),
            order = CLAIM_ORDER,
            filter = scope.filter(),
            windowed = windowed,
            ended = ended,
            endpoint_slots = free_slots("endpoint_slot", "l.queue = ''", ""),
            queue_slots = free_slots("queue_slot", "l.queue <> ''", " AND g.queue = l.queue"),
            shard_picked = shard_picked,
            shard_unlocked = shard_unlocked,
            set = claim_set_of(
                ["i.now", "i.owner", "i.expires", "i.fence"],
                ["se.slots[k.n]", "sq.slots[k.n]"]
            ),
            admission_ended = window_ended("admission", "$1"),
            charged_room = shard_has_room_for(
                "admission_windows",
                "ws",
                "ws.window_started_at",
                "q.m"
            ),
        )
    })
});

/// [`shard_has_room`] for `m` claims at once (PostgreSQL's batch under
/// limits): shard row `s` of level `level` may take `m` more claims of the
/// window starting at `start`.
fn shard_has_room_for(s: &str, level: &str, start: &str, m: &str) -> String {
    let share = shard_share(Dialect::Postgres, level, &format!("{s}.shard"));
    format!(
        "{share} >= {m} AND ({s}.window_started_at IS NULL OR {s}.window_started_at < {start} \
           OR ({s}.window_started_at = {start} AND {s}.claims + {m} <= {share}))"
    )
}

/// A subquery yielding the id of the oldest todo of endpoint `$5` (and
/// queue `$6`) that a takeover may claim ([`TAKEOVER_CONDITION`]) and
/// admission lets in; `$1` is now.
///
/// It reads only the endpoint's live claims and open retry windows, never
/// its history. SQLite has no statistics (the product never runs ANALYZE)
/// and served the `ORDER BY` from the listings' index, walking every
/// finished todo of the endpoint: an empty `claim_next` took 67 ms against
/// 400 000 finished todos, and sixteen agents draining a queue at once ran
/// the single writer connection past its acquire timeout. So on SQLite the
/// two partial indexes are named, one branch each, and the few candidates
/// sorted. PostgreSQL combines the same two indexes by itself (a BitmapOr)
/// and locks the row it takes.
pub fn oldest_takeover(dialect: Dialect, scope: ClaimScope) -> &'static str {
    &OLDEST_TAKEOVER[dialect_index(dialect)][scope.index()]
}

static OLDEST_TAKEOVER: LazyLock<[[String; 2]; 2]> = LazyLock::new(|| {
    [Dialect::Sqlite, Dialect::Postgres].map(|d| {
        [ClaimScope::AnyQueue, ClaimScope::OneQueue].map(|s| oldest_takeover_text(d, s.filter()))
    })
});

fn oldest_takeover_text(dialect: Dialect, filter: &str) -> String {
    let admitted = admitted(dialect);
    match dialect {
        Dialect::Sqlite => format!(
            concat!(
                "SELECT id FROM (",
                "SELECT id, priority, created_at FROM todos INDEXED BY todos_claimed_by_endpoint ",
                "WHERE endpoint_id = $5{filter} AND ",
                lapsed_lease!(),
                " AND ",
                below_attempt_cap!(),
                " AND {admitted}",
                " UNION ALL ",
                "SELECT id, priority, created_at FROM todos INDEXED BY todos_retry_by_endpoint ",
                "WHERE endpoint_id = $5{filter} AND ",
                elapsed_retry!(),
                " AND ",
                below_attempt_cap!(),
                " AND {admitted}",
                ") ORDER BY {order} LIMIT 1"
            ),
            filter = filter,
            admitted = admitted,
            order = CLAIM_ORDER,
        ),
        Dialect::Postgres => format!(
            "SELECT id FROM todos WHERE endpoint_id = $5{filter} AND {TAKEOVER_CONDITION} \
             AND {admitted} ORDER BY {CLAIM_ORDER} LIMIT 1 FOR UPDATE SKIP LOCKED"
        ),
    }
}

/// The takeover of [`oldest_takeover`]'s todo, with [`claim_set`]'s
/// parameters.
pub fn claim_takeover(dialect: Dialect, scope: ClaimScope) -> &'static str {
    &CLAIM_TAKEOVER[dialect_index(dialect)][scope.index()]
}

static CLAIM_TAKEOVER: LazyLock<[[String; 2]; 2]> = LazyLock::new(|| {
    [Dialect::Sqlite, Dialect::Postgres].map(|d| {
        [ClaimScope::AnyQueue, ClaimScope::OneQueue].map(|s| {
            format!(
                concat!(
                    "UPDATE todos SET {set} WHERE id = ({oldest}) RETURNING ",
                    todo_columns!()
                ),
                set = claim_set(d),
                oldest = oldest_takeover(d, s),
            )
        })
    })
});

/// The claim of one todo by id (`$5`) of endpoint `$6`: pending, or one a
/// takeover may claim, and admitted.
pub fn claim_by_id(dialect: Dialect) -> &'static str {
    &CLAIM_BY_ID[dialect_index(dialect)]
}

static CLAIM_BY_ID: LazyLock<[String; 2]> = LazyLock::new(|| {
    [Dialect::Sqlite, Dialect::Postgres].map(|d| {
        format!(
            concat!(
                "UPDATE todos SET {set} WHERE id = $5 AND endpoint_id = $6 ",
                "AND (state = 'pending' OR ({takeover})) AND {admitted} RETURNING ",
                todo_columns!()
            ),
            set = claim_set(d),
            takeover = TAKEOVER_CONDITION,
            admitted = admitted(d),
        )
    })
});

/// The holder's guard: `$h` the id, `$h+1` the endpoint, `$h+2` the owner,
/// `$h+3` the fence hash (a fenced lease needs its token; an unfenced one
/// ignores it).
pub fn holder_guard(h: usize) -> String {
    qualified_holder_guard(
        "",
        &format!("${h}"),
        &format!("${}", h + 1),
        &format!("${}", h + 2),
        &format!("${}", h + 3),
    )
}

/// [`holder_guard`] on the columns of `table` (`""` or `"todos."`), the
/// holder's values given as expressions: one text for the guard whether a
/// holder is bound alone or joined from a batch ([`COMPLETE_BATCH`]).
fn qualified_holder_guard(
    table: &str,
    id: &str,
    endpoint_id: &str,
    owner: &str,
    fence: &str,
) -> String {
    format!(
        "{table}id = {id} AND {table}endpoint_id = {endpoint_id} AND {table}state = 'claimed' \
         AND {table}owner = {owner} \
         AND ({table}lease_token_hash IS NULL OR {table}lease_token_hash = {fence})"
    )
}

/// What a completion sets, `result` and `now` given as expressions.
fn complete_set(result: &str, now: &str) -> String {
    format!(
        "state = 'done', result = {result}, completed_at = {now}, updated_at = {now}, \
         lease_expires_at = NULL, lease_token_hash = NULL"
    )
}

/// The holder's completion: `$1` result, `$2` now, `$3`–`$6` the holder's
/// guard.
pub static COMPLETE: LazyLock<String> = LazyLock::new(|| {
    format!(
        concat!(
            "UPDATE todos SET {set} WHERE {guard} RETURNING ",
            todo_columns!()
        ),
        set = complete_set("$1", "$2"),
        guard = holder_guard(3),
    )
});

/// The holder's attempt and its cap, read under the holder's guard
/// (`$1`–`$4`) before `fail` decides ([`after_failure`]) on SQLite and on the
/// transaction path (which appends its row lock).
///
/// [`after_failure`]: crate::domain::backoff::after_failure
pub static FAIL_HELD: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT attempt, max_attempts FROM todos WHERE {}",
        holder_guard(1)
    )
});

/// The failure `fail` decided: `$1` result, `$2` next retry (NULL for a
/// dead letter), `$3` completed at (a dead letter's now), `$4` now, `$5` the
/// todo.
pub const FAIL: &str = concat!(
    "UPDATE todos SET state = 'failed', result = $1, next_retry_at = $2, ",
    "completed_at = $3, updated_at = $4, lease_expires_at = NULL, ",
    "lease_token_hash = NULL WHERE id = $5 RETURNING ",
    todo_columns!()
);

/// What a failure sets, `result` and `now` given as expressions: a retry
/// after the backoff of [`retry_backoff`](crate::domain::backoff::retry_backoff)
/// while attempts remain, else the dead letter's end: the rule of
/// [`after_failure`](crate::domain::backoff::after_failure), which the lane
/// and the transaction path call, made here by the statement from the row
/// it updates (PostgreSQL only). A change to the rule changes both; the
/// conformance suite holds both to the same cases.
fn fail_set(result: &str, now: &str) -> String {
    let schedule: Vec<String> = crate::domain::backoff::retry_backoff_schedule()
        .iter()
        .map(|backoff| backoff.as_millis().to_string())
        .collect();
    format!(
        "state = 'failed', result = {result}, \
         next_retry_at = CASE WHEN attempt < max_attempts THEN {now} + \
         (ARRAY[{schedule}]::bigint[])[LEAST(GREATEST(attempt, 1), {last})::int] END, \
         completed_at = CASE WHEN attempt < max_attempts THEN NULL ELSE {now} END, \
         updated_at = {now}, lease_expires_at = NULL, lease_token_hash = NULL",
        schedule = schedule.join(","),
        last = schedule.len(),
    )
}

/// A failed attempt's disposition, from its todo's `next_retry_at`
/// (expression) after [`fail_set`].
fn fail_disposition(next_retry_at: &str) -> String {
    format!(
        "CASE WHEN {next_retry_at} IS NULL THEN '{dead}' ELSE '{retry}' END",
        dead = Disposition::DeadLettered.as_str(),
        retry = Disposition::RetryScheduled.as_str(),
    )
}

/// How a holder ends its lease in one PostgreSQL statement (group commit,
/// `postgres/transitions.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ending {
    Complete,
    Fail,
    /// Back to pending ([`RELEASE`]); binds no result.
    Release,
}

const ENDINGS: [Ending; 3] = [Ending::Complete, Ending::Fail, Ending::Release];

/// PostgreSQL: the holder's `complete`, `fail` or `release` and closing its
/// attempt as one data-modifying statement: `$1` result (a release leaves
/// it as it was), `$2` now, `$3`–`$6` the holder's guard, `$7` the
/// attempt's summary and `$8` whether it was cut.
pub fn finish_with_attempt(ending: Ending) -> &'static str {
    &FINISH_WITH_ATTEMPT[ending as usize]
}

static FINISH_WITH_ATTEMPT: LazyLock<[String; 3]> = LazyLock::new(|| {
    ENDINGS.map(|ending| {
        let (finish, outcome, disposition) = match ending {
            Ending::Complete => (
                COMPLETE.clone(),
                Outcome::Completed,
                format!("'{}'", Disposition::Done.as_str()),
            ),
            Ending::Fail => (
                format!(
                    concat!(
                        "UPDATE todos SET {set} WHERE {guard} RETURNING ",
                        todo_columns!()
                    ),
                    set = fail_set("$1", "$2"),
                    guard = holder_guard(3),
                ),
                Outcome::Failed,
                format!("(SELECT {} FROM d)", fail_disposition("next_retry_at")),
            ),
            Ending::Release => (
                format!(
                    concat!(
                        "UPDATE todos SET {set} WHERE {guard} RETURNING ",
                        todo_columns!()
                    ),
                    set = release_set("$2"),
                    guard = holder_guard(3),
                ),
                Outcome::Released,
                format!("'{}'", Disposition::Requeued.as_str()),
            ),
        };
        format!(
            concat!(
                "WITH d AS ({finish}), a AS (UPDATE todo_attempts SET ended_at = $2, ",
                "outcome = '{outcome}', disposition = {disposition}, summary = $7, ",
                "summary_truncated = $8 ",
                "WHERE todo_id = (SELECT id FROM d) AND ended_at IS NULL) SELECT ",
                todo_columns!(),
                " FROM d"
            ),
            finish = finish,
            outcome = outcome.as_str(),
            disposition = disposition,
        )
    })
});

/// PostgreSQL: [`finish_with_attempt`] for several holders at once, one
/// statement and one commit (group commit, `postgres/batch.rs`). `$1` is a
/// JSON array with one object per holder: `id`, `endpoint_id`, `owner`,
/// `fence` (hash or null), `result`, `now`, `summary`, `truncated` (0/1).
/// Each row is held to its own guard, as in [`holder_guard`]; the ids must
/// be distinct. Returns the rows ended.
pub fn finish_batch(ending: Ending) -> &'static str {
    &FINISH_BATCH[ending as usize]
}

static FINISH_BATCH: LazyLock<[String; 3]> = LazyLock::new(|| {
    ENDINGS.map(|ending| {
        let (set, outcome, disposition) = match ending {
            Ending::Complete => (
                complete_set("i.result", "i.now"),
                Outcome::Completed,
                format!("'{}'", Disposition::Done.as_str()),
            ),
            Ending::Fail => (
                fail_set("i.result", "i.now"),
                Outcome::Failed,
                fail_disposition("d.next_retry_at"),
            ),
            Ending::Release => (
                release_set("i.now"),
                Outcome::Released,
                format!("'{}'", Disposition::Requeued.as_str()),
            ),
        };
        format!(
            concat!(
                "WITH i AS (SELECT * FROM json_to_recordset($1::json) AS i(id text, ",
                "endpoint_id text, owner text, fence text, result text, now bigint, summary text, ",
                "truncated bigint)), ",
                "d AS (UPDATE todos SET {set} FROM i WHERE {guard} RETURNING todos.*), ",
                "a AS (UPDATE todo_attempts SET ended_at = i.now, outcome = '{outcome}', ",
                "disposition = {disposition}, summary = i.summary, ",
                "summary_truncated = i.truncated ",
                "FROM d JOIN i ON i.id = d.id ",
                "WHERE todo_attempts.todo_id = d.id AND todo_attempts.ended_at IS NULL) SELECT ",
                todo_columns!(),
                " FROM d"
            ),
            set = set,
            guard = qualified_holder_guard("todos.", "i.id", "i.endpoint_id", "i.owner", "i.fence"),
            outcome = outcome.as_str(),
            disposition = disposition,
        )
    })
});

/// A released todo: pending again, its owner, lease and fence gone.
fn release_set(now: &str) -> String {
    format!(
        "state = 'pending', owner = NULL, lease_expires_at = NULL, \
         lease_token_hash = NULL, updated_at = {now}"
    )
}

/// The holder's release: the todo pending again, its lease and fence gone;
/// `$1` now, `$2`–`$5` the holder's guard.
pub static RELEASE: LazyLock<String> = LazyLock::new(|| {
    format!(
        concat!(
            "UPDATE todos SET {set} WHERE {guard} RETURNING ",
            todo_columns!()
        ),
        set = release_set("$1"),
        guard = holder_guard(2),
    )
});

/// The holder's heartbeat: `$1` lease expiry, `$2` now, `$3` note, `$4`–`$7`
/// the holder's guard.
pub static HEARTBEAT: LazyLock<String> = LazyLock::new(|| {
    format!(
        concat!(
            "UPDATE todos SET lease_expires_at = $1, updated_at = $2, ",
            "last_note = COALESCE($3, last_note) WHERE {} RETURNING ",
            todo_columns!()
        ),
        holder_guard(4)
    )
});

/// A claim's attempt record: `$1` todo, `$2` seq, `$3` attempt, `$4`
/// claimant, `$5` now.
pub const OPEN_ATTEMPT: &str = "INSERT INTO todo_attempts (todo_id, seq, attempt, claimant, claimed_at) \
     VALUES ($1, $2, $3, $4, $5)";

/// The closed attempts a claimant is shown: `$1` todo, `$2` how many.
pub const PRIOR_ATTEMPTS: &str = concat!(
    "SELECT ",
    attempt_columns!(),
    " FROM todo_attempts WHERE todo_id = $1 AND ended_at IS NOT NULL ORDER BY seq DESC LIMIT $2"
);

/// Closes the todo's open attempt: `$1` now, `$2` outcome, `$3`
/// disposition, `$4` summary, `$5` whether it was cut, `$6` the todo.
pub const CLOSE_ATTEMPT: &str = "UPDATE todo_attempts SET ended_at = $1, outcome = $2, \
     disposition = $3, summary = $4, summary_truncated = $5 \
     WHERE todo_id = $6 AND ended_at IS NULL";

/// Deletes all but the newest `$2` closed attempts of todo `$1`.
pub const PRUNE_ATTEMPTS: &str = "DELETE FROM todo_attempts WHERE todo_id = $1 AND ended_at IS NOT NULL \
     AND seq <= (SELECT seq FROM todo_attempts WHERE todo_id = $1 AND ended_at IS NOT NULL \
     ORDER BY seq DESC LIMIT 1 OFFSET $2)";

/// Counts `$1` pruned attempts on todo `$2`.
pub const COUNT_PRUNED: &str =
    "UPDATE todos SET attempts_pruned = attempts_pruned + $1 WHERE id = $2";

/// A heartbeat's mark on the open attempt: `$1` now, `$2` note, `$3` todo.
pub const HEARTBEAT_ATTEMPT: &str = "UPDATE todo_attempts SET last_heartbeat_at = $1, \
     note = COALESCE($2, note) WHERE todo_id = $3 AND ended_at IS NULL";

/// A heartbeat's note on its endpoint: `$1` note, `$2` now, `$3` endpoint.
pub const ENDPOINT_NOTE: &str =
    "UPDATE endpoints SET last_note = $1, last_note_at = $2 WHERE id = $3";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_claim_text_names_the_same_set_and_order() {
        for dialect in [Dialect::Sqlite, Dialect::Postgres] {
            for scope in [ClaimScope::AnyQueue, ClaimScope::OneQueue] {
                let claim = claim_pending(dialect, scope);
                assert!(claim.contains(&claim_set(dialect)), "{claim}");
                assert!(claim.contains(&admitted_pending(dialect)), "{claim}");
                assert!(
                    claim.contains("ORDER BY priority DESC, created_at, id LIMIT 1"),
                    "{claim}"
                );
                assert!(oldest_takeover(dialect, scope).contains(&admitted(dialect)));
                assert_eq!(claim.contains("$6"), scope == ClaimScope::OneQueue);
                assert!(claim_takeover(dialect, scope).contains(oldest_takeover(dialect, scope)));
            }
        }
        for scope in [ClaimScope::AnyQueue, ClaimScope::OneQueue] {
            let fused = claim_pending_with_attempt(scope);
            assert!(fused.contains(claim_pending(Dialect::Postgres, scope)));
            let batch = claim_pending_batch(scope);
            assert!(batch.contains(&claim_set_of(
                ["i.now", "i.owner", "i.expires", "i.fence"],
                ["NULL", "NULL"]
            )));
            assert!(batch.contains(&format!(
                "ORDER BY {CLAIM_ORDER} LIMIT $3 FOR UPDATE SKIP LOCKED"
            )));
            assert_eq!(batch.contains("$4"), scope == ClaimScope::OneQueue);
        }
        assert!(finish_with_attempt(Ending::Complete).contains(COMPLETE.as_str()));
        assert!(finish_with_attempt(Ending::Fail).contains(&fail_set("$1", "$2")));
        assert!(finish_batch(Ending::Complete).contains(&complete_set("i.result", "i.now")));
        assert!(finish_batch(Ending::Fail).contains(&fail_set("i.result", "i.now")));
        assert!(finish_with_attempt(Ending::Release).contains(&release_set("$2")));
        assert!(finish_batch(Ending::Release).contains(&release_set("i.now")));
        assert!(RELEASE.contains(&release_set("$1")));
        assert!(claim_pending(Dialect::Postgres, ClaimScope::AnyQueue).contains("SKIP LOCKED"));
        assert!(!claim_pending(Dialect::Sqlite, ClaimScope::AnyQueue).contains("SKIP LOCKED"));
    }

    /// The ops of `sql`'s program on `conn` named `op`.
    fn ops_named(conn: &rusqlite::Connection, sql: &str, op: &str) -> usize {
        let mut explain = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
        let mut ops = explain.raw_query();
        let mut found = 0;
        while let Some(row) = ops.next().unwrap() {
            found += usize::from(row.get::<_, String>(1).unwrap() == op);
        }
        found
    }

    /// SQLite's todo rowids: every priority's band lies above the rowids
    /// given before bands (below 2^40) and below the next priority's, the
    /// top one inside SQLite's integers; and the insert finds the last
    /// rowid of its band with one seek, not a scan of the table.
    #[test]
    fn on_sqlite_each_priority_has_a_band_of_its_own_found_by_a_seek() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for migration in crate::store::migrate::migrations(Dialect::Sqlite) {
            conn.execute_batch(migration.sql).unwrap();
        }
        let band = |priority: i64| -> i64 {
            conn.query_row(
                &format!("SELECT {}", sqlite_priority_band("?1")),
                [priority],
                |row| row.get(0),
            )
            .unwrap()
        };
        let rows_a_band = 1_i64 << SQLITE_BAND_BITS;
        assert_eq!(
            band(-MAX_PRIORITY),
            rows_a_band,
            "above the unbanded rowids"
        );
        assert_eq!(band(-MAX_PRIORITY - 5), band(-MAX_PRIORITY), "clamped");
        for p in [-MAX_PRIORITY, -1, 0, 1, MAX_PRIORITY - 1] {
            assert_eq!(band(p + 1) - band(p), rows_a_band, "{p}");
        }
        assert!(band(MAX_PRIORITY).checked_add(rows_a_band).is_some());

        let insert = crate::store::sql::sqlite::lane::numbered(insert_todo(Dialect::Sqlite));
        let mut plan = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {insert}"))
            .unwrap();
        let mut rows = plan.raw_query();
        let mut steps: Vec<String> = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            steps.push(row.get(3).unwrap());
        }
        assert!(
            steps
                .iter()
                .any(|s| s == "SEARCH todos USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"),
            "{steps:?}"
        );
        assert!(!steps.iter().any(|s| s.starts_with("SCAN")), "{steps:?}");
    }

    /// The writer thread's charge: one claim on the endpoint's and the
    /// queue's windowed levels (a shard still counting an older window
    /// counts anew), nothing on another queue's or on a level without a
    /// window (it has no shard), and no temporary b-tree built to do it.
    #[test]
    fn on_sqlite_the_writers_charge_counts_each_windowed_level_once() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for migration in crate::store::migrate::migrations(Dialect::Sqlite) {
            conn.execute_batch(migration.sql).unwrap();
        }
        // Level rows without an endpoint row: the charge reads no endpoint.
        conn.pragma_update(None, "foreign_keys", "OFF").unwrap();
        conn.execute_batch(
            "INSERT INTO admission (endpoint_id, queue, window_ms, max_claims_per_window, \
               window_started_at, updated_at) VALUES \
               ('ep', '', 3600000, 10, 1000, 0), ('ep', 'inbox', 3600000, 10, 1000, 0), \
               ('ep', 'other', 3600000, 10, 1000, 0); \
             INSERT INTO admission (endpoint_id, queue, max_in_flight, updated_at) \
               VALUES ('ep', 'unwindowed', 5, 0); \
             INSERT INTO admission_windows (endpoint_id, queue, shard, window_started_at, claims) \
               VALUES ('ep', '', 0, 1000, 3), ('ep', 'inbox', 0, 500, 7), \
               ('ep', 'other', 0, 1000, 1);",
        )
        .unwrap();
        let charge = crate::store::sql::sqlite::lane::numbered(&CHARGE_WINDOW_ON_ONE_WRITER);
        for queue in ["inbox", "unwindowed"] {
            let charged = conn
                .execute(&charge, rusqlite::params![2000, "ep", queue])
                .unwrap();
            let expected = if queue == "inbox" { 2 } else { 1 };
            assert_eq!(charged, expected, "{queue}");
        }
        let shards: Vec<(String, i64, i64)> = conn
            .prepare(
                "SELECT queue, window_started_at, claims FROM admission_windows ORDER BY queue",
            )
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let shard = |q: &str, start: i64, claims: i64| (q.to_owned(), start, claims);
        assert_eq!(
            shards,
            vec![
                shard("", 1000, 5),
                shard("inbox", 1000, 1),
                shard("other", 1000, 1),
            ]
        );
        assert_eq!(ops_named(&conn, &charge, "OpenEphemeral"), 0, "{charge}");
    }
}
