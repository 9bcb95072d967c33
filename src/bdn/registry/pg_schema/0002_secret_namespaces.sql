-- The namespaces whose jobs may use a secret (docs/sync.md, "Secrets"): the sorted list joined by
-- ','; '' for none, so every secret stored before this migration may be used only by jobs that
-- an admin key for every namespace starts.
ALTER TABLE secrets ADD COLUMN namespaces TEXT COLLATE "C" NOT NULL DEFAULT '';
