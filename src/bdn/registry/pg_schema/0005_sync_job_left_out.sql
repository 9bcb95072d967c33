-- How many entries a sync job's selection matched that its version does not hold (file://:
-- symlinks and special files; SyncProgress::objects_left_out). 0 for every job recorded before
-- this migration.
ALTER TABLE sync_jobs ADD COLUMN objects_left_out BIGINT NOT NULL DEFAULT 0;
