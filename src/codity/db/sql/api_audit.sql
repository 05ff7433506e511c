-- name: api_audit_insert
-- Who did what to which target, from which request and address. Details hold ids and names
-- only, never secrets or payload values.
INSERT INTO audit_events (org_id, project_id, actor_user_id, actor_api_key_id, action,
                          target_type, target_id, details, request_id, ip)
VALUES (:org_id::uuid, :project_id::uuid, :actor_user_id::uuid, :actor_api_key_id::uuid,
        :action::text, :target_type::text, :target_id::text, :details::jsonb,
        :request_id::text, :ip::inet);
