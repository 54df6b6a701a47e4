-- The resource guard's verdict is per node (several nodes share one store).
ALTER TABLE nodes ADD COLUMN pressure TEXT;
ALTER TABLE nodes ADD COLUMN pressure_hold BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE nodes ADD COLUMN pressure_since REAL;
