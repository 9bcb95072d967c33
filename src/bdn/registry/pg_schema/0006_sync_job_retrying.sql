-- While a sync job's run retries a source call: for how long it had been when the progress was
-- written, and the last transient error (SyncProgress::retrying_ms, retry_error). 0 and '' for
-- every job recorded before this migration.
ALTER TABLE sync_jobs ADD COLUMN retrying_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sync_jobs ADD COLUMN retry_error TEXT NOT NULL DEFAULT '';
