-- The resource guard's adaptive limit, per node, beside its hold: ETAs play both.
ALTER TABLE nodes ADD COLUMN pressure_limit INTEGER;
