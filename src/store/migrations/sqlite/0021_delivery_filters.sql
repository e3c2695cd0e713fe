-- The delivery history's filters read an index each (docs/intake.md,
-- "Delivery history"): a listing by decision, event or sender walks only the
-- matching deliveries, newest first, not the webhook's whole history until
-- it has found a page (a rare decision among 1 000 000 deliveries).
CREATE INDEX deliveries_by_decision ON deliveries (webhook_id, decision, received_at, id);
CREATE INDEX deliveries_by_event ON deliveries (webhook_id, event, received_at, id);
CREATE INDEX deliveries_by_sender ON deliveries (webhook_id, sender, received_at, id);
