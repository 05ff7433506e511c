-- Half of every new heap page of `jobs` left free (80 as migrated): room for a job's next
-- versions on its own page. Without a HOT update it still writes every index entry (ADR-33).
ALTER TABLE jobs SET (fillfactor = 50);
