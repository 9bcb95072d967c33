-- Finished sync jobs by age, for their deletion after bdn serve --sync-job-retention
-- (SyncJobStore::DeleteFinished).
CREATE INDEX sync_jobs_finished ON sync_jobs(finished_ms)
  WHERE state IN ('READY', 'FAILED', 'CANCELED');
