import { Link } from "@tanstack/react-router";
import type { ReactNode } from "react";

import { api, unwrap } from "../api/client";
import { useAction, useLive } from "../api/hooks";
import type { ExecutionPublic, JobDetail } from "../api/types";
import { formatBytes } from "../lib/format";
import { useProjectId, useSession } from "../lib/session";
import { durationBetween, formatDateTime, formatDuration, formatRelative } from "../lib/time";
import { useNow } from "../lib/useNow";
import { Badge, StatusPill } from "../ui/Badge";
import { Button } from "../ui/Button";
import { Card } from "../ui/Card";
import { PageHeader } from "../ui/PageHeader";
import { EmptyState, ErrorState, InlineError, SkeletonRows } from "../ui/States";

const RETRYABLE = new Set(["failed", "dead_letter", "cancelled"]);
const CANCELLABLE = new Set(["waiting", "scheduled", "queued", "claimed", "running"]);

export function JobDetailPage({ jobId }: { jobId: string }) {
  const projectId = useProjectId();
  const { can } = useSession();
  const now = useNow();
  const path = { project_id: projectId, job_id: Number(jobId) };
  const job = useLive(["job", projectId, jobId], () =>
    unwrap(api.GET("/api/v1/projects/{project_id}/jobs/{job_id}", { params: { path } })),
  );
  const invalidate = [
    ["job", projectId, jobId],
    ["jobs", projectId],
  ];
  const retry = useAction(
    () => unwrap(api.POST("/api/v1/projects/{project_id}/jobs/{job_id}/retry", { params: { path } })),
    invalidate,
  );
  const cancel = useAction(
    () => unwrap(api.POST("/api/v1/projects/{project_id}/jobs/{job_id}/cancel", { params: { path } })),
    invalidate,
  );

  const back = (
    <Link to="/jobs" className="text-sm text-indigo-600 hover:underline">
      ← All jobs
    </Link>
  );
  if (job.error && !job.data) {
    return (
      <div data-testid="page-job-detail">
        {back}
        <Card className="mt-3">
          <ErrorState error={job.error} onRetry={() => void job.refetch()} />
        </Card>
      </div>
    );
  }
  if (!job.data) return <SkeletonRows rows={8} />;
  const j: JobDetail = job.data;

  return (
    <div data-testid="page-job-detail">
      {back}
      <div className="mt-2">
        <PageHeader
          title={`Job #${j.id}`}
          description={
            <span className="flex flex-wrap items-center gap-2">
              <StatusPill status={j.status} testId="job-status" />
              <span>
                <code className="text-slate-700">{j.handler}</code> on{" "}
                <b className="font-medium text-slate-700">{j.queue_name}</b>
              </span>
            </span>
          }
          actions={
            can("member") && (
              <>
                {RETRYABLE.has(j.status) && (
                  <Button data-testid="job-retry" busy={retry.isPending} onClick={() => retry.mutate(undefined)}>
                    Retry
                  </Button>
                )}
                {CANCELLABLE.has(j.status) && !j.cancel_requested_at && (
                  <Button
                    variant="danger"
                    data-testid="job-cancel"
                    busy={cancel.isPending}
                    onClick={() => cancel.mutate(undefined)}
                  >
                    Cancel
                  </Button>
                )}
              </>
            )
          }
        />
      </div>
      <div className="space-y-4">
        <InlineError error={retry.error ?? cancel.error} />
        {j.progress != null && (
          <Card>
            <div className="flex items-center justify-between text-sm">
              <span className="text-slate-600">{j.progress_message ?? "Progress"}</span>
              <span className="font-medium tabular-nums">{j.progress}%</span>
            </div>
            <div className="mt-2 h-2 rounded-full bg-slate-100" data-testid="job-progress">
              <div className="h-2 rounded-full bg-indigo-500 transition-all" style={{ width: `${j.progress}%` }} />
            </div>
          </Card>
        )}
        <div className="grid gap-4 lg:grid-cols-3">
          <Card title="Details" className="lg:col-span-2">
            <dl className="grid grid-cols-1 gap-x-6 gap-y-3 text-sm sm:grid-cols-2">
              <Item label="Priority" value={j.priority} />
              <Item
                label="Attempts"
                value={<span data-testid="job-attempts">{`${j.attempt} / ${j.max_attempts}`}</span>}
              />
              <Item label="Created" value={<Time value={j.created_at} now={now} />} />
              <Item label="Run at" value={<Time value={j.run_at} now={now} />} />
              <Item label="Started" value={<Time value={j.started_at} now={now} />} />
              <Item label="Finished" value={<Time value={j.finished_at} now={now} />} />
              <Item label="Run time" value={durationBetween(j.started_at, j.finished_at)} />
              <Item label="Timeout" value={formatDuration(j.timeout_ms)} />
              <Item label="Idempotency key" value={j.idempotency_key ?? "—"} />
              <Item
                label="Depends on"
                value={j.depends_on.length ? j.depends_on.map((d) => `#${d}`).join(", ") : "—"}
              />
            </dl>
            {j.last_error && (
              <div className="mt-4 rounded-md bg-rose-50 p-3 text-sm text-rose-800 ring-1 ring-rose-200">
                <div className="font-medium">Last error</div>
                <pre className="mt-1 font-mono text-xs whitespace-pre-wrap">{j.last_error}</pre>
              </div>
            )}
          </Card>
          <Card title="Payload">
            <div className="mb-2 flex flex-wrap gap-2 text-xs text-slate-500">
              <Badge>{formatBytes(j.payload_size)}</Badge>
              {j.payload_keys?.map((k) => (
                <Badge key={k} tone="blue">
                  {k}
                </Badge>
              ))}
            </div>
            <Json value={j.payload} />
            <div className="mt-4 mb-1 text-xs font-medium text-slate-500">Result</div>
            {j.result == null ? (
              <div className="text-sm text-slate-500">{j.finished_at ? "none" : "none yet"}</div>
            ) : (
              <Json value={j.result} testId="job-result" />
            )}
          </Card>
        </div>
        <Card title="Execution timeline" padded={false} testId="job-timeline">
          {j.executions.length === 0 ? (
            <EmptyState
              title="No attempt has finished yet"
              hint="Each attempt appears here when it ends, with its error if it failed."
            />
          ) : (
            <ol className="divide-y divide-slate-100">
              {j.executions.map((e) => (
                <ExecutionRow key={e.execution_seq} e={e} now={now} />
              ))}
            </ol>
          )}
        </Card>
        <Card title="Logs" padded={false} testId="job-logs">
          {j.logs.length === 0 ? (
            <EmptyState title="No log lines" hint="Handlers write log lines with their job context." />
          ) : (
            <div className="max-h-80 overflow-auto font-mono text-xs" tabIndex={0} role="log" aria-label="Log lines">
              {j.logs.map((l) => (
                <div key={l.id} className="flex gap-3 border-b border-slate-50 px-4 py-1.5">
                  <span className="shrink-0 text-slate-500 tabular-nums">{formatDateTime(l.created_at)}</span>
                  <span
                    className={
                      l.level === "error"
                        ? "shrink-0 text-rose-600"
                        : l.level === "warning"
                          ? "shrink-0 text-amber-600"
                          : "shrink-0 text-slate-500"
                    }
                  >
                    {l.level}
                  </span>
                  <span className="shrink-0 text-slate-500">#{l.execution_seq}</span>
                  <span className="text-slate-800">{l.message}</span>
                </div>
              ))}
            </div>
          )}
        </Card>
      </div>
    </div>
  );
}

function ExecutionRow({ e, now }: { e: ExecutionPublic; now: number }) {
  return (
    <li className="px-4 py-3">
      <div className="flex flex-wrap items-center gap-3 text-sm">
        <span className="w-16 font-medium text-slate-900 tabular-nums">Try {e.attempt}</span>
        <StatusPill status={e.status} />
        <span className="text-slate-500 tabular-nums">{formatDuration(e.duration_ms)}</span>
        <span className="ml-auto text-slate-500" title={formatDateTime(e.finished_at)}>
          {formatRelative(e.finished_at, now)}
        </span>
      </div>
      {e.error && (
        <pre className="mt-2 ml-16 rounded bg-slate-50 p-2 font-mono text-xs whitespace-pre-wrap text-rose-700">
          {e.error}
        </pre>
      )}
    </li>
  );
}

function Item({ label, value }: { label: string; value: ReactNode }) {
  return (
    <div className="flex justify-between gap-4 border-b border-slate-50 pb-2 sm:block sm:border-0 sm:pb-0">
      <dt className="text-xs text-slate-500">{label}</dt>
      <dd className="text-slate-800 tabular-nums">{value}</dd>
    </div>
  );
}

function Time({ value, now }: { value: string | null; now: number }) {
  if (!value) return <>—</>;
  return (
    <span title={formatDateTime(value)}>
      {formatDateTime(value)} <span className="text-slate-500">({formatRelative(value, now)})</span>
    </span>
  );
}

function Json({ value, testId }: { value: unknown; testId?: string }) {
  return (
    <pre
      data-testid={testId}
      tabIndex={0} // it may scroll: keyboard users must be able to reach and scroll it
      className="max-h-64 overflow-auto rounded-md bg-slate-50 p-3 font-mono text-xs text-slate-800 ring-1 ring-slate-100"
    >
      {JSON.stringify(value, null, 2)}
    </pre>
  );
}
