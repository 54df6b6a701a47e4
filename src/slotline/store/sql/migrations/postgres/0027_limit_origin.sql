-- Per-key limits belong to whoever set them, as rate limits and budgets do (0025):
-- 'config' for one slotline.yaml declares (the next `slotline serve` removes it once the
-- file no longer does), 'api' for one set at run time. Limits written by a `serve` before
-- this migration count as 'api' until a `serve` declares them again.
ALTER TABLE limits ADD COLUMN origin TEXT NOT NULL DEFAULT 'api';
