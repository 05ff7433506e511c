-- Half-empty leaf pages in the three indexes a claim writes (primary key, (queue_id, status,
-- id), the leased jobs): room for new row versions before a page needs a deletion pass (ADR-24).
ALTER INDEX pk_jobs SET (fillfactor = 50);
ALTER INDEX idx_jobs_queue_status_id SET (fillfactor = 50);
ALTER INDEX idx_jobs_worker_leased SET (fillfactor = 50);
