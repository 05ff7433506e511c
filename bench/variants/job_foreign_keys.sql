-- The three foreign keys of jobs as they were before migration 0036 (queue_id CASCADE,
-- retry_policy_id and schedule_id SET NULL) in place of its per-statement triggers: what
-- checking them per row costs (ADR-28).
DROP TRIGGER jobs_check_references ON jobs;
DROP TRIGGER jobs_check_reference_change ON jobs;
DROP TRIGGER queues_delete_jobs ON queues;
DROP TRIGGER retry_policies_forget_deleted ON retry_policies;
DROP TRIGGER scheduled_jobs_forget_deleted ON scheduled_jobs;
ALTER TABLE jobs
  ADD CONSTRAINT fk_jobs_queue_id_queues FOREIGN KEY (queue_id)
    REFERENCES queues (id) ON DELETE CASCADE,
  ADD CONSTRAINT fk_jobs_retry_policy_id_retry_policies FOREIGN KEY (retry_policy_id)
    REFERENCES retry_policies (id) ON DELETE SET NULL,
  ADD CONSTRAINT fk_jobs_schedule_id_scheduled_jobs FOREIGN KEY (schedule_id)
    REFERENCES scheduled_jobs (id) ON DELETE SET NULL;
