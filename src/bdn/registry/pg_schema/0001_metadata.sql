-- The metadata of `bdn serve --db`: volumes, versions, tags and head, idempotency keys, API keys,
-- sync jobs, secrets and push claims (docs/postgresql.md). Text compares bytewise
-- (COLLATE "C"), as in SQLite, so listings sort the same on both. Integer columns are BIGINT;
-- flags are 0/1 integers, as the statements shared with SQLite write them.

CREATE TABLE volumes(
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  ns TEXT COLLATE "C" NOT NULL,
  name TEXT COLLATE "C" NOT NULL,
  head TEXT COLLATE "C",
  sequence BIGINT NOT NULL DEFAULT 0,
  created_ms BIGINT NOT NULL,
  UNIQUE(ns, name));

CREATE TABLE versions(
  volume_id BIGINT NOT NULL REFERENCES volumes(id),
  digest TEXT COLLATE "C" NOT NULL,
  sequence BIGINT NOT NULL,
  lifecycle TEXT COLLATE "C" NOT NULL,
  created_ms BIGINT NOT NULL,
  deleted_ms BIGINT,
  delete_after_ms BIGINT,
  files BIGINT NOT NULL,
  bytes BIGINT NOT NULL,
  chunks BIGINT NOT NULL,
  entries BIGINT NOT NULL,
  source_uri TEXT COLLATE "C" NOT NULL DEFAULT '',
  source_revision TEXT COLLATE "C" NOT NULL DEFAULT '',
  source_listing_digest TEXT COLLATE "C" NOT NULL DEFAULT '',
  PRIMARY KEY(volume_id, digest));

CREATE TABLE tags(
  volume_id BIGINT NOT NULL REFERENCES volumes(id),
  name TEXT COLLATE "C" NOT NULL,
  digest TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY(volume_id, name));

CREATE TABLE idempotency_keys(
  key TEXT COLLATE "C" PRIMARY KEY,
  request TEXT COLLATE "C" NOT NULL,
  sequence BIGINT NOT NULL,
  unchanged BIGINT NOT NULL,
  head_updated BIGINT NOT NULL,
  tags_applied TEXT COLLATE "C" NOT NULL,
  created_ms BIGINT NOT NULL,
  detail TEXT COLLATE "C" NOT NULL DEFAULT '');
CREATE INDEX idempotency_keys_by_age ON idempotency_keys(created_ms);

-- rowid: the order of insertion, as SQLite's implicit rowid (listings are oldest first).
CREATE TABLE api_keys(
  rowid BIGINT GENERATED ALWAYS AS IDENTITY,
  id TEXT COLLATE "C" PRIMARY KEY,
  ns TEXT COLLATE "C" NOT NULL,
  scopes TEXT COLLATE "C" NOT NULL,
  secret_b3 TEXT COLLATE "C" NOT NULL,
  created_ms BIGINT NOT NULL,
  revoked_ms BIGINT);

CREATE TABLE sync_jobs(
  rowid BIGINT GENERATED ALWAYS AS IDENTITY,
  id TEXT COLLATE "C" PRIMARY KEY,
  source_uri TEXT COLLATE "C" NOT NULL,
  ns TEXT COLLATE "C" NOT NULL,
  volume TEXT COLLATE "C" NOT NULL,
  tag TEXT COLLATE "C" NOT NULL,
  includes TEXT COLLATE "C" NOT NULL,
  excludes TEXT COLLATE "C" NOT NULL,
  auth_secret_name TEXT COLLATE "C" NOT NULL,
  retry_deadline_ms BIGINT NOT NULL,
  state TEXT COLLATE "C" NOT NULL,
  cancel_requested BIGINT NOT NULL DEFAULT 0,
  source_revision TEXT COLLATE "C" NOT NULL DEFAULT '',
  listing_digest TEXT COLLATE "C" NOT NULL DEFAULT '',
  objects_total BIGINT NOT NULL DEFAULT 0,
  objects_done BIGINT NOT NULL DEFAULT 0,
  bytes_total BIGINT NOT NULL DEFAULT 0,
  bytes_done BIGINT NOT NULL DEFAULT 0,
  bytes_fetched BIGINT NOT NULL DEFAULT 0,
  version TEXT COLLATE "C" NOT NULL DEFAULT '',
  unchanged BIGINT NOT NULL DEFAULT 0,
  error_code TEXT COLLATE "C" NOT NULL DEFAULT '',
  error_message TEXT COLLATE "C" NOT NULL DEFAULT '',
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL,
  started_ms BIGINT NOT NULL DEFAULT 0,
  finished_ms BIGINT NOT NULL DEFAULT 0,
  runs BIGINT NOT NULL DEFAULT 0,
  endpoint TEXT COLLATE "C" NOT NULL DEFAULT '',
  region TEXT COLLATE "C" NOT NULL DEFAULT '');
CREATE INDEX sync_jobs_by_dest ON sync_jobs(ns, volume);
CREATE INDEX sync_jobs_unfinished ON sync_jobs(state) WHERE state IN ('PENDING', 'SYNCING');

CREATE TABLE sync_job_files(
  job_id TEXT COLLATE "C" NOT NULL,
  path TEXT COLLATE "C" NOT NULL,
  size BIGINT NOT NULL,
  etag TEXT COLLATE "C" NOT NULL,
  digest TEXT COLLATE "C" NOT NULL,
  layout BIGINT NOT NULL,
  index_digest TEXT COLLATE "C" NOT NULL,
  chunks BIGINT NOT NULL,
  PRIMARY KEY(job_id, path));

CREATE TABLE secrets(
  name TEXT COLLATE "C" PRIMARY KEY,
  sealed_hex TEXT COLLATE "C" NOT NULL,
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL);

-- One row per volume that was ever claimed; a claim is live while expires_at is ahead of the
-- database server's clock (clock_timestamp()).
CREATE TABLE push_claims(
  ns TEXT COLLATE "C" NOT NULL,
  volume TEXT COLLATE "C" NOT NULL,
  id TEXT COLLATE "C" NOT NULL,
  holder TEXT COLLATE "C" NOT NULL,
  idempotency_key TEXT COLLATE "C" NOT NULL DEFAULT '',
  acquired_at TIMESTAMPTZ NOT NULL,
  expires_at TIMESTAMPTZ NOT NULL,
  PRIMARY KEY(ns, volume));
