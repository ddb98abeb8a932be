-- A fingerprint's `created_at` is the store's RFC 3339 timestamp, as every other `*_at` text
-- column (SQLite's declared INTEGER affinity keeps such text as text; PostgreSQL refused it).
ALTER TABLE secret_fingerprints ALTER COLUMN created_at TYPE TEXT USING created_at::TEXT;
