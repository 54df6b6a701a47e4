-- A run's branch landed by `slotline merge` (issue 15): the branch it went into, the
-- commit that branch was moved to, when, and whether it was squashed. NULL: not merged.
ALTER TABLE attempts ADD COLUMN merged_into TEXT;
ALTER TABLE attempts ADD COLUMN merged_commit TEXT;
ALTER TABLE attempts ADD COLUMN merged_at DOUBLE PRECISION;
ALTER TABLE attempts ADD COLUMN merged_squash BOOLEAN;
