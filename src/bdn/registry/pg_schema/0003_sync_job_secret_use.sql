-- How a sync job may use the secret it names (docs/sync.md, "Secrets"; SecretUse): 'any' (started
-- with an admin key for every namespace), 'namespace' (any other key: only a secret set for the
-- job's namespace), checked again at every run. Every job recorded before this migration, and
-- every row a server from before it writes, is 'legacy': a secret set for the job's namespace, or
-- one with no namespaces.
ALTER TABLE sync_jobs ADD COLUMN secret_use TEXT COLLATE "C" NOT NULL DEFAULT 'legacy';
