import { createColumnHelper } from "@tanstack/react-table";

import { api, unwrap } from "../api/client";
import { POLL_MS, useLive } from "../api/hooks";
import type { WorkerPublic } from "../api/types";
import { formatDateTime, formatRelative, formatSpan, formatUptime } from "../lib/time";
import { useNow } from "../lib/useNow";
import { StatusPill } from "../ui/Badge";
import { Card } from "../ui/Card";
import { cx } from "../ui/cx";
import { PageHeader } from "../ui/PageHeader";
import { EmptyState } from "../ui/States";
import { DataTable } from "../ui/Table";

const col = createColumnHelper<WorkerPublic>();
const LIVE = new Set(["active", "draining"]);

export function WorkersPage() {
  const now = useNow(1000);
  // Heartbeats and in-flight counts change without an event: keep polling while live too.
  const workers = useLive(
    ["workers"],
    () => unwrap(api.GET("/api/v1/workers", { params: { query: { limit: 200 } } })),
    { liveInterval: POLL_MS },
  );
  // Uptime and heartbeat age come from the server (no clock skew); live workers tick on from
  // the moment of the last answer, dead ones stay frozen at the server's figure.
  const sinceFetch = Math.max(0, (now - workers.dataUpdatedAt) / 1000);
  const live = (w: WorkerPublic) => LIVE.has(w.status);

  const columns = [
    col.accessor("status", {
      header: "Status",
      cell: (c) => <StatusPill status={c.getValue()} testId={`worker-status-${c.row.original.pid}`} />,
    }),
    col.display({
      id: "worker",
      header: "Worker",
      cell: (c) => (
        <div>
          <div className="font-medium text-slate-900">
            {c.row.original.hostname}
            <span className="text-slate-500">:{c.row.original.pid}</span>
          </div>
          <div className="text-xs text-slate-500">
            {c.row.original.queues.map((q) => q.name).join(", ") || "no queues"}
          </div>
        </div>
      ),
    }),
    col.accessor("uptime_s", {
      header: "Uptime",
      meta: { numeric: true },
      cell: (c) => {
        const w = c.row.original;
        const seconds = live(w) ? w.uptime_s + sinceFetch : w.uptime_s;
        return (
          <span
            data-testid={`worker-uptime-${w.pid}`}
            className={cx(
              live(w) ? "text-emerald-700" : w.status === "dead" ? "font-medium text-rose-700" : "text-slate-500",
            )}
            title={live(w) ? "running" : `frozen at ${formatDateTime(w.stopped_at)}`}
          >
            {formatUptime(seconds)}
          </span>
        );
      },
    }),
    col.accessor("heartbeat_age_s", {
      header: "Heartbeat",
      meta: { numeric: true },
      cell: (c) => {
        const w = c.row.original;
        const age = live(w) ? w.heartbeat_age_s + sinceFetch : w.heartbeat_age_s;
        return <span title={formatDateTime(w.last_heartbeat_at)}>{formatSpan(age * 1000)} ago</span>;
      },
    }),
    col.display({
      id: "load",
      header: "In flight / capacity",
      meta: { numeric: true },
      cell: (c) => (
        <span data-testid={`worker-load-${c.row.original.pid}`}>
          {c.row.original.in_flight} / {c.row.original.capacity}
        </span>
      ),
    }),
    col.accessor("lingering_threads", {
      header: "Lingering threads",
      meta: { numeric: true },
      cell: (c) => (
        <span
          data-testid={`worker-lingering-${c.row.original.pid}`}
          title="Sync handlers whose attempt timed out or was cancelled but whose thread still runs; each holds a slot until it returns"
        >
          {c.getValue()}
        </span>
      ),
    }),
    col.accessor("started_at", {
      header: "Started",
      meta: { hideOnMobile: true },
      cell: (c) => <span title={formatDateTime(c.getValue())}>{formatRelative(c.getValue(), now)}</span>,
    }),
    col.accessor("version", { header: "Version", meta: { hideOnMobile: true } }),
  ];

  const items = workers.data?.items;
  const alive = items?.filter(live).length ?? 0;
  const dead = items?.filter((w) => w.status === "dead").length ?? 0;
  return (
    <div data-testid="page-workers">
      <PageHeader
        title="Workers"
        description={
          items
            ? `${alive} alive, ${dead} dead. Uptime ticks while a worker lives and freezes when it stops or dies.`
            : "Workers serving this organization's queues."
        }
      />
      <Card padded={false}>
        <DataTable
          testId="workers-table"
          label="Workers"
          columns={columns}
          data={items}
          getRowId={(w) => w.id}
          rowTestId={(w) => `worker-row-${w.pid}`}
          loading={workers.isLoading}
          error={workers.error}
          onRetry={() => void workers.refetch()}
          empty={
            <EmptyState
              title="No workers yet"
              hint="Start one with `codity worker`; it appears here within a heartbeat."
            />
          }
        />
      </Card>
    </div>
  );
}
