import { createColumnHelper } from "@tanstack/react-table";
import { Link, useNavigate } from "@tanstack/react-router";
import { type FormEvent, useState } from "react";

import { api, unwrap } from "../api/client";
import { ApiError } from "../api/errors";
import { useAction, useLive } from "../api/hooks";
import type { QueuePublic } from "../api/types";
import { formatNumber } from "../lib/format";
import { useProjectId, useSession } from "../lib/session";
import { formatDuration } from "../lib/time";
import { Badge } from "../ui/Badge";
import { Button } from "../ui/Button";
import { Card } from "../ui/Card";
import { Dialog } from "../ui/Dialog";
import { Checkbox, Field, Input, Select } from "../ui/Field";
import { PageHeader } from "../ui/PageHeader";
import { EmptyState, ErrorState, InlineError, SkeletonRows } from "../ui/States";
import { DataTable } from "../ui/Table";
import { ThroughputChart } from "../ui/ThroughputChart";

const col = createColumnHelper<QueuePublic>();

type QueueAction = "pause" | "resume" | "drain";
const CONFIRM: Record<QueueAction, { verb: string; what: string }> = {
  pause: {
    verb: "Pause",
    what: "Workers stop claiming its jobs; jobs already running finish. New jobs are still accepted and wait.",
  },
  resume: { verb: "Resume", what: "Workers claim its jobs again (a drain in progress ends)." },
  drain: {
    verb: "Drain",
    what: "The queue takes no new jobs (enqueue answers queue_draining); workers finish every job it already has, then it pauses itself.",
  },
};

/** Jobs not yet finished and not running: what a queue still has to do. */
export const backlog = (q: QueuePublic) => q.depth.waiting + q.depth.scheduled + q.depth.queued;

export function QueuesPage() {
  const projectId = useProjectId();
  const { can } = useSession();
  const navigate = useNavigate();
  const path = { project_id: projectId };
  const queues = useLive(["queues", projectId], () =>
    unwrap(api.GET("/api/v1/projects/{project_id}/queues", { params: { path, query: { limit: 200 } } })),
  );
  const [editing, setEditing] = useState<QueuePublic | "new" | null>(null);
  const [statsFor, setStatsFor] = useState<QueuePublic | null>(null);

  const [confirming, setConfirming] = useState<{ queue: QueuePublic; action: QueueAction } | null>(null);
  const toggle = useAction(
    ({ queue, action }: { queue: QueuePublic; action: QueueAction }) =>
      unwrap(
        api.POST(`/api/v1/projects/{project_id}/queues/{queue_id}/${action}`, {
          params: { path: { ...path, queue_id: queue.id } },
        }),
      ),
    [
      ["queues", projectId],
      ["overview", projectId],
    ],
    () => setConfirming(null),
  );

  const columns = [
    col.accessor("name", {
      header: "Queue",
      cell: (c) => (
        <div className="flex items-center gap-2">
          <Link
            to="/jobs"
            search={{ queue: c.row.original.name }}
            className="font-medium text-slate-900 hover:text-indigo-600"
          >
            {c.getValue()}
          </Link>
          {c.row.original.draining_since ? (
            <Badge tone="violet" dot testId={`queue-state-${c.getValue()}`}>
              draining
            </Badge>
          ) : c.row.original.is_paused ? (
            <Badge tone="amber" dot testId={`queue-state-${c.getValue()}`}>
              paused
            </Badge>
          ) : (
            <Badge tone="green" dot testId={`queue-state-${c.getValue()}`}>
              active
            </Badge>
          )}
        </div>
      ),
    }),
    col.display({
      id: "depth",
      header: "Depth",
      meta: { numeric: true },
      cell: (c) => formatNumber(backlog(c.row.original)),
    }),
    col.accessor("claimable", {
      header: "Claimable",
      meta: { numeric: true, hideOnMobile: true },
      cell: (c) => formatNumber(c.getValue()),
    }),
    col.accessor("running", { header: "Running", meta: { numeric: true }, cell: (c) => formatNumber(c.getValue()) }),
    col.accessor("concurrency_limit", {
      header: "Limit",
      meta: { numeric: true, hideOnMobile: true },
      cell: (c) => (c.getValue() == null ? <span className="text-slate-500">none</span> : formatNumber(c.getValue())),
    }),
    col.display({
      id: "flow",
      header: "Flow control",
      meta: { hideOnMobile: true },
      cell: (c) => <FlowBadges q={c.row.original} />,
    }),
    col.accessor("retry_policy", {
      header: "Retry policy",
      meta: { hideOnMobile: true },
      cell: (c) => {
        const p = c.getValue();
        return p ? (
          <span title={`${p.strategy}, up to ${p.max_attempts} attempts`}>
            {p.name}{" "}
            <span className="text-slate-500">
              · {p.strategy} ×{p.max_attempts}
            </span>
          </span>
        ) : (
          <span className="text-slate-500">default ×{c.row.original.default_max_attempts}</span>
        );
      },
    }),
    col.accessor("default_timeout_ms", {
      header: "Timeout",
      meta: { numeric: true, hideOnMobile: true },
      cell: (c) => formatDuration(c.getValue()),
    }),
    col.display({
      id: "actions",
      header: "",
      cell: (c) => {
        const q = c.row.original;
        return (
          <div className="flex justify-end gap-2">
            <Button size="sm" variant="ghost" data-testid={`stats-${q.name}`} onClick={() => setStatsFor(q)}>
              Stats
            </Button>
            {can("admin") && (
              <>
                <Button
                  size="sm"
                  data-testid={`${q.is_paused || q.draining_since ? "resume" : "pause"}-${q.name}`}
                  onClick={() =>
                    setConfirming({ queue: q, action: q.is_paused || q.draining_since ? "resume" : "pause" })
                  }
                >
                  {q.is_paused || q.draining_since ? "Resume" : "Pause"}
                </Button>
                {!q.is_paused && !q.draining_since && (
                  <Button
                    size="sm"
                    variant="ghost"
                    data-testid={`drain-${q.name}`}
                    onClick={() => setConfirming({ queue: q, action: "drain" })}
                  >
                    Drain
                  </Button>
                )}
                <Button size="sm" variant="ghost" data-testid={`edit-${q.name}`} onClick={() => setEditing(q)}>
                  Edit
                </Button>
              </>
            )}
          </div>
        );
      },
    }),
  ];

  return (
    <div data-testid="page-queues">
      <PageHeader
        title="Queues"
        description="Live depth and settings of every queue in the project."
        actions={
          can("admin") && (
            <Button variant="primary" data-testid="new-queue" onClick={() => setEditing("new")}>
              New queue
            </Button>
          )
        }
      />
      <Card padded={false}>
        <DataTable
          testId="queues-table"
          label="Queues"
          onRowActivate={(q) => void navigate({ to: "/jobs", search: { queue: q.name } })}
          columns={columns}
          data={queues.data?.items}
          getRowId={(q) => q.id}
          rowTestId={(q) => `queue-row-${q.name}`}
          loading={queues.isLoading}
          error={queues.error}
          onRetry={() => void queues.refetch()}
          empty={
            <EmptyState
              title="No queues yet"
              hint="A queue holds jobs for workers to claim. Create one to start enqueuing."
            />
          }
        />
      </Card>
      {statsFor && <QueueStatsDialog queue={statsFor} onClose={() => setStatsFor(null)} />}
      {confirming && (
        <Dialog
          open
          testId="queue-confirm"
          title={`${CONFIRM[confirming.action].verb} queue ${confirming.queue.name}?`}
          onClose={() => {
            toggle.reset();
            setConfirming(null);
          }}
          footer={
            <>
              <Button onClick={() => setConfirming(null)}>Cancel</Button>
              <Button
                variant={confirming.action === "resume" ? "primary" : "danger"}
                data-testid="queue-confirm-submit"
                busy={toggle.isPending}
                onClick={() => toggle.mutate(confirming)}
              >
                {CONFIRM[confirming.action].verb}
              </Button>
            </>
          }
        >
          <p className="text-sm text-slate-700">{CONFIRM[confirming.action].what}</p>
          <p className="mt-2 text-xs text-slate-500">
            {formatNumber(backlog(confirming.queue))} waiting, {formatNumber(confirming.queue.running)} running now.
          </p>
          <div className="mt-3">
            <InlineError error={toggle.error} />
          </div>
        </Dialog>
      )}
      {editing && <QueueDialog queue={editing === "new" ? null : editing} onClose={() => setEditing(null)} />}
    </div>
  );
}

function QueueDialog({ queue, onClose }: { queue: QueuePublic | null; onClose: () => void }) {
  const projectId = useProjectId();
  const path = { project_id: projectId };
  const policies = useLive(
    ["retry-policies", projectId],
    () => unwrap(api.GET("/api/v1/projects/{project_id}/retry-policies", { params: { path } })),
    { interval: false },
  );
  const [name, setName] = useState(queue?.name ?? "");
  const [description, setDescription] = useState(queue?.description ?? "");
  const [limit, setLimit] = useState(queue?.concurrency_limit?.toString() ?? "");
  const [attempts, setAttempts] = useState(String(queue?.default_max_attempts ?? 3));
  const [timeout, setTimeoutMs] = useState(queue?.default_timeout_ms?.toString() ?? "");
  const [policy, setPolicy] = useState(queue?.retry_policy?.id ?? "");
  const [priority, setPriority] = useState(String(queue?.priority ?? 0));
  const [keyLimit, setKeyLimit] = useState(queue?.key_concurrency_limit?.toString() ?? "");
  const [rateCount, setRateCount] = useState(queue?.rate_limit?.count.toString() ?? "");
  const [ratePeriod, setRatePeriod] = useState(queue?.rate_limit?.period_s.toString() ?? "1");
  const [perKey, setPerKey] = useState(queue?.rate_limit_per_key ?? false);

  const save = useAction(
    () => {
      const body = {
        description: description || null,
        priority: Number(priority),
        concurrency_limit: limit ? Number(limit) : null,
        default_max_attempts: Number(attempts),
        default_timeout_ms: timeout ? Number(timeout) : null,
        retry_policy_id: policy || null,
        key_concurrency_limit: keyLimit ? Number(keyLimit) : null,
        rate_limit: rateCount ? { count: Number(rateCount), period_s: Number(ratePeriod) } : null,
        rate_limit_per_key: rateCount ? perKey : false,
      };
      return queue
        ? unwrap(
            api.PATCH("/api/v1/projects/{project_id}/queues/{queue_id}", {
              params: { path: { ...path, queue_id: queue.id } },
              body,
            }),
          )
        : unwrap(api.POST("/api/v1/projects/{project_id}/queues", { params: { path }, body: { ...body, name } }));
    },
    [["queues", projectId]],
    onClose,
  );
  const err = save.error instanceof ApiError ? save.error : null;

  function submit(event: FormEvent) {
    event.preventDefault();
    save.mutate(undefined);
  }

  return (
    <Dialog
      open
      testId="queue-dialog"
      title={queue ? `Edit queue ${queue.name}` : "New queue"}
      onClose={onClose}
      footer={
        <>
          <Button onClick={onClose}>Cancel</Button>
          <Button variant="primary" type="submit" form="queue-form" busy={save.isPending} data-testid="queue-save">
            {queue ? "Save" : "Create queue"}
          </Button>
        </>
      }
    >
      <form id="queue-form" onSubmit={submit} className="space-y-4">
        {!queue && (
          <Field
            label="Name"
            name="name"
            hint="lowercase letters, digits, '.', '_' or '-'"
            error={err?.fieldMessage("name")}
          >
            {({ id, invalid }) => (
              <Input
                id={id}
                invalid={invalid}
                data-testid="queue-name"
                required
                value={name}
                onChange={(e) => setName(e.target.value)}
              />
            )}
          </Field>
        )}
        <Field label="Description" name="description" error={err?.fieldMessage("description")}>
          {({ id, invalid }) => (
            <Input id={id} invalid={invalid} value={description} onChange={(e) => setDescription(e.target.value)} />
          )}
        </Field>
        <div className="grid gap-4 sm:grid-cols-4">
          <Field label="Priority" name="priority" hint="higher is claimed first" error={err?.fieldMessage("priority")}>
            {({ id, invalid }) => (
              <Input
                id={id}
                invalid={invalid}
                data-testid="queue-priority"
                type="number"
                min={-1000}
                max={1000}
                value={priority}
                onChange={(e) => setPriority(e.target.value)}
              />
            )}
          </Field>
          <Field
            label="Concurrency limit"
            name="concurrency_limit"
            hint="blank: no limit"
            error={err?.fieldMessage("concurrency_limit")}
          >
            {({ id, invalid }) => (
              <Input
                id={id}
                invalid={invalid}
                data-testid="queue-limit"
                type="number"
                min={1}
                value={limit}
                onChange={(e) => setLimit(e.target.value)}
              />
            )}
          </Field>
          <Field label="Max attempts" name="default_max_attempts" error={err?.fieldMessage("default_max_attempts")}>
            {({ id, invalid }) => (
              <Input
                id={id}
                invalid={invalid}
                type="number"
                min={1}
                max={100}
                value={attempts}
                onChange={(e) => setAttempts(e.target.value)}
              />
            )}
          </Field>
          <Field
            label="Timeout (ms)"
            name="default_timeout_ms"
            hint="blank: none"
            error={err?.fieldMessage("default_timeout_ms")}
          >
            {({ id, invalid }) => (
              <Input
                id={id}
                invalid={invalid}
                type="number"
                min={1}
                value={timeout}
                onChange={(e) => setTimeoutMs(e.target.value)}
              />
            )}
          </Field>
        </div>
        <Field label="Retry policy" name="retry_policy_id" error={err?.fieldMessage("retry_policy_id")}>
          {({ id, invalid }) => (
            <Select id={id} invalid={invalid} value={policy} onChange={(e) => setPolicy(e.target.value)}>
              <option value="">None (use max attempts above)</option>
              {policies.data?.items.map((p) => (
                <option key={p.id} value={p.id}>
                  {p.name} — {p.strategy}, {p.max_attempts} attempts
                </option>
              ))}
            </Select>
          )}
        </Field>
        <fieldset className="space-y-3 rounded-md p-3 ring-1 ring-slate-200" data-testid="queue-flow">
          <legend className="px-1 text-xs font-medium text-slate-500">Flow control</legend>
          <div className="grid gap-4 sm:grid-cols-3">
            <Field
              label="Per-key limit"
              name="key_concurrency_limit"
              hint="jobs with one concurrency key at once; blank: none"
              error={err?.fieldMessage("key_concurrency_limit")}
            >
              {({ id, invalid }) => (
                <Input
                  id={id}
                  invalid={invalid}
                  data-testid="queue-key-limit"
                  type="number"
                  min={1}
                  value={keyLimit}
                  onChange={(e) => setKeyLimit(e.target.value)}
                />
              )}
            </Field>
            <Field
              label="Rate limit: starts"
              name="rate_limit_count"
              hint="blank: no rate limit"
              error={err?.fieldMessage("count")}
            >
              {({ id, invalid }) => (
                <Input
                  id={id}
                  invalid={invalid}
                  data-testid="queue-rate-count"
                  type="number"
                  min={1}
                  value={rateCount}
                  onChange={(e) => setRateCount(e.target.value)}
                />
              )}
            </Field>
            <Field label="per seconds" name="rate_limit_period_s" error={err?.fieldMessage("period_s")}>
              {({ id, invalid }) => (
                <Input
                  id={id}
                  invalid={invalid}
                  data-testid="queue-rate-period"
                  type="number"
                  min={0.001}
                  step="any"
                  value={ratePeriod}
                  onChange={(e) => setRatePeriod(e.target.value)}
                />
              )}
            </Field>
          </div>
          <Checkbox
            label="Rate limit each concurrency key on its own"
            data-testid="queue-rate-per-key"
            checked={perKey}
            disabled={!rateCount}
            onChange={(e) => setPerKey(e.target.checked)}
          />
        </fieldset>
        {err &&
          ![
            "name",
            "priority",
            "description",
            "concurrency_limit",
            "default_max_attempts",
            "default_timeout_ms",
            "retry_policy_id",
            "key_concurrency_limit",
            "count",
            "period_s",
          ].some((f) => err.fieldMessage(f)) && <InlineError error={err} />}
        {save.error && !err && <InlineError error={save.error} />}
      </form>
    </Dialog>
  );
}

/** A queue's flow-control settings at a glance: per-key limit and claim rate limit. */
function FlowBadges({ q }: { q: QueuePublic }) {
  if (q.key_concurrency_limit == null && q.rate_limit == null) return <span className="text-slate-500">none</span>;
  return (
    <span className="flex flex-wrap gap-1" data-testid={`queue-flow-${q.name}`}>
      {q.key_concurrency_limit != null && <Badge tone="violet">≤{q.key_concurrency_limit} per key</Badge>}
      {q.rate_limit != null && (
        <Badge tone="blue">
          {formatNumber(q.rate_limit.count)} / {q.rate_limit.period_s} s{q.rate_limit_per_key ? " per key" : ""}
        </Badge>
      )}
    </span>
  );
}

/** One queue's last hour: throughput per minute and wait / run time percentiles. */
function QueueStatsDialog({ queue, onClose }: { queue: QueuePublic; onClose: () => void }) {
  const projectId = useProjectId();
  const stats = useLive(["queue-stats", projectId, queue.id], () =>
    unwrap(
      api.GET("/api/v1/projects/{project_id}/queues/{queue_id}/stats", {
        params: { path: { project_id: projectId, queue_id: queue.id } },
      }),
    ),
  );
  const s = stats.data;
  return (
    <Dialog open testId="queue-stats" title={`${queue.name} · last hour`} onClose={onClose}>
      {stats.error && !s ? (
        <ErrorState error={stats.error} onRetry={() => void stats.refetch()} />
      ) : !s ? (
        <SkeletonRows rows={5} />
      ) : (
        <div className="space-y-5">
          <ThroughputChart buckets={s.throughput} />
          <table className="w-full text-sm" data-testid="queue-percentiles">
            <thead>
              <tr className="text-xs text-slate-500">
                <th className="py-1 text-left font-medium"></th>
                <th className="py-1 text-right font-medium">p50</th>
                <th className="py-1 text-right font-medium">p95</th>
                <th className="py-1 text-right font-medium">samples</th>
              </tr>
            </thead>
            <tbody className="tabular-nums">
              {(
                [
                  ["Wait (run at → claimed)", s.wait],
                  ["Run (started → finished)", s.run],
                ] as const
              ).map(([label, p]) => (
                <tr key={label} className="border-t border-slate-100">
                  <td className="py-1.5 text-slate-600">{label}</td>
                  <td className="py-1.5 text-right">{formatDuration(p.p50_ms)}</td>
                  <td className="py-1.5 text-right">{formatDuration(p.p95_ms)}</td>
                  <td className="py-1.5 text-right text-slate-500">{formatNumber(p.samples)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <div className="flex flex-wrap gap-2 text-xs">
            <Badge tone="blue">claimable {formatNumber(s.claimable)}</Badge>
            <Badge tone="indigo">running {formatNumber(s.running)}</Badge>
            <Badge tone="violet">scheduled {formatNumber(s.depth.scheduled)}</Badge>
            <Badge tone="red">dead letters {formatNumber(s.depth.dead_letter)}</Badge>
          </div>
        </div>
      )}
    </Dialog>
  );
}
