import { Link } from "@tanstack/react-router";
import { createColumnHelper } from "@tanstack/react-table";

import { api, unwrap } from "../api/client";
import { useLive } from "../api/hooks";
import { JOB_STATUSES, type QueueDepth, type QueuePublic } from "../api/types";
import { formatNumber } from "../lib/format";
import { useProjectId } from "../lib/session";
import { formatSpan } from "../lib/time";
import { Badge, StatusPill } from "../ui/Badge";
import { Card, Stat } from "../ui/Card";
import { PageHeader } from "../ui/PageHeader";
import { EmptyState, ErrorState, Skeleton } from "../ui/States";
import { DataTable } from "../ui/Table";
import { backlog } from "./Queues";
import { ChartsPanel } from "./ChartsPanel";

export function OverviewPage() {
  const projectId = useProjectId();
  // Health (scheduler lag, oldest job) moves without an event: a slow poll while live.
  const overview = useLive(
    ["overview", projectId],
    () => unwrap(api.GET("/api/v1/projects/{project_id}/overview", { params: { path: { project_id: projectId } } })),
    { liveInterval: 10_000 },
  );
  const data = overview.data;
  return (
    <div data-testid="page-overview">
      <PageHeader title="Overview" description="The project at a glance, updated live." />
      {overview.error && !data ? (
        <Card>
          <ErrorState error={overview.error} onRetry={() => void overview.refetch()} />
        </Card>
      ) : !data ? (
        <div className="grid gap-4 sm:grid-cols-2 lg:grid-cols-4" data-testid="loading">
          {Array.from({ length: 4 }, (_, i) => (
            <Skeleton key={i} className="h-20" />
          ))}
        </div>
      ) : (
        <div className="space-y-4">
          <div className="grid grid-cols-2 gap-3 lg:grid-cols-4">
            <Stat
              label="Completed · last hour"
              value={formatNumber(sum(data.throughput, "completed"))}
              tone="green"
              testId="stat-completed"
            />
            <Stat
              label="Failed · last hour"
              value={formatNumber(sum(data.throughput, "failed"))}
              tone={sum(data.throughput, "failed") > 0 ? "red" : undefined}
              testId="stat-failed"
            />
            <Stat
              label="Workers alive / dead"
              testId="stat-workers"
              value={
                <span>
                  <span className="text-emerald-600">{data.workers.active + data.workers.draining}</span>
                  <span className="text-slate-300"> / </span>
                  <span className={data.workers.dead > 0 ? "text-rose-600" : "text-slate-500"}>
                    {data.workers.dead}
                  </span>
                </span>
              }
              hint={data.workers.draining > 0 ? `${data.workers.draining} draining` : undefined}
            />
            <Stat
              label="Dead letters"
              value={formatNumber(data.dead_letters)}
              tone={data.dead_letters > 0 ? "red" : undefined}
              testId="stat-dlq"
            />
          </div>
          <OverviewCharts />
          <div className="grid gap-4 lg:grid-cols-3">
            <Card title="Health" testId="health">
              <dl className="space-y-3 text-sm">
                <HealthRow
                  label="Database"
                  ok={data.health.database_ok}
                  text={data.health.database_ok ? "reachable" : "unreachable"}
                />
                <HealthRow
                  label="Scheduler"
                  ok={data.health.scheduler_ok}
                  text={
                    data.health.scheduler_lag_s == null
                      ? "on time"
                      : `lag ${formatSpan(data.health.scheduler_lag_s * 1000)}`
                  }
                />
                <HealthRow
                  label="Oldest claimable job"
                  ok={(data.health.oldest_queued_age_s ?? 0) < 60}
                  text={
                    data.health.oldest_queued_age_s == null
                      ? "none waiting"
                      : formatSpan(data.health.oldest_queued_age_s * 1000)
                  }
                />
                <HealthRow label="Queues" ok text={`${data.queues} (${data.paused_queues} paused)`} />
              </dl>
            </Card>
            <Card title="Jobs by status" testId="depth-by-status" className="lg:col-span-2">
              <DepthBars depth={data.totals} />
            </Card>
          </div>
          <QueuesSummary />
        </div>
      )}
    </div>
  );
}

function OverviewCharts() {
  const projectId = useProjectId();
  const queues = useLive(["queues", projectId], () =>
    unwrap(
      api.GET("/api/v1/projects/{project_id}/queues", {
        params: { path: { project_id: projectId }, query: { limit: 200 } },
      }),
    ),
  );
  return <ChartsPanel queues={queues.data?.items.map((q) => q.name) ?? []} />;
}

/** Each queue's backlog and activity, linking to its jobs. */
function QueuesSummary() {
  const projectId = useProjectId();
  const queues = useLive(["queues", projectId], () =>
    unwrap(
      api.GET("/api/v1/projects/{project_id}/queues", {
        params: { path: { project_id: projectId }, query: { limit: 200 } },
      }),
    ),
  );
  return (
    <Card title="Queues" padded={false} testId="overview-queues">
      <DataTable
        columns={queueColumns}
        data={queues.data?.items}
        getRowId={(q) => q.id}
        label="Queues"
        loading={queues.isLoading}
        error={queues.error}
        onRetry={() => void queues.refetch()}
        empty={<EmptyState title="No queues yet" />}
      />
    </Card>
  );
}

const qcol = createColumnHelper<QueuePublic>();
const queueColumns = [
  qcol.accessor("name", {
    header: "Queue",
    cell: (c) => (
      <span className="flex items-center gap-2">
        <Link to="/jobs" search={{ queue: c.getValue() }} className="font-medium text-slate-900 hover:text-indigo-600">
          {c.getValue()}
        </Link>
        {c.row.original.is_paused && (
          <Badge tone="amber" dot>
            paused
          </Badge>
        )}
      </span>
    ),
  }),
  qcol.display({
    id: "backlog",
    header: "Depth",
    meta: { numeric: true },
    cell: (c) => formatNumber(backlog(c.row.original)),
  }),
  qcol.accessor("running", { header: "Running", meta: { numeric: true }, cell: (c) => formatNumber(c.getValue()) }),
  qcol.display({
    id: "dead",
    header: "Dead letters",
    meta: { numeric: true },
    cell: (c) => formatNumber(c.row.original.depth.dead_letter),
  }),
];

function sum(buckets: { completed: number; failed: number }[], key: "completed" | "failed"): number {
  return buckets.reduce((n, b) => n + b[key], 0);
}

function HealthRow({ label, ok, text }: { label: string; ok: boolean; text: string }) {
  return (
    <div className="flex items-center justify-between gap-2">
      <dt className="text-slate-600">{label}</dt>
      <dd className="flex items-center gap-2 tabular-nums">
        <span className="text-slate-700">{text}</span>
        <Badge tone={ok ? "green" : "red"} dot>
          {ok ? "ok" : "check"}
        </Badge>
      </dd>
    </div>
  );
}

const barColour: Record<string, string> = {
  waiting: "bg-slate-400",
  scheduled: "bg-violet-500",
  queued: "bg-sky-500",
  claimed: "bg-indigo-400",
  running: "bg-indigo-600",
  completed: "bg-emerald-500",
  failed: "bg-amber-500",
  dead_letter: "bg-rose-500",
  cancelled: "bg-slate-300",
};

function DepthBars({ depth }: { depth: QueueDepth }) {
  const values = JOB_STATUSES.map((s) => [s, depth[s] ?? 0] as const);
  const max = Math.max(1, ...values.map(([, n]) => n));
  return (
    <div className="grid gap-x-6 gap-y-2 sm:grid-cols-2">
      {values.map(([status, n]) => (
        <div
          key={status}
          className="grid grid-cols-[7.5rem_1fr_4rem] items-center gap-2"
          data-testid={`depth-${status}`}
        >
          <StatusPill status={status} />
          <div className="h-2 rounded-full bg-slate-100">
            <div className={`h-2 rounded-full ${barColour[status]}`} style={{ width: `${(n / max) * 100}%` }} />
          </div>
          <span className="text-right text-sm text-slate-700 tabular-nums">{formatNumber(n)}</span>
        </div>
      ))}
    </div>
  );
}
