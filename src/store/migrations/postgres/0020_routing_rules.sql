-- Routing rules per webhook (08-intake.md, "Routing rules"): JSON
-- (`{"rules":[{"if":"<jq>","then":{"queue":"…"}}],"default":…,"on_error":…}`);
-- NULL routes every delivery to the webhook's queue, as before rules existed.
ALTER TABLE webhooks ADD COLUMN rules TEXT;

-- A dropped delivery spends its idempotency key: a redelivery finds it here.
CREATE INDEX deliveries_dropped_by_key ON deliveries (webhook_id, idempotency_key)
    WHERE decision = 'dropped';
