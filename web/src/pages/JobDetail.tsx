import { Link } from "@tanstack/react-router";
import { type ReactNode, useEffect, useRef, useState } from "react";

import { api, unwrap } from "../api/client";
import { useAction, useLive } from "../api/hooks";
import type { ExecutionPublic, JobBlocker, JobDetail } from "../api/types";
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
const LEASED = new Set(["claimed", "running"]);
const WAITING = new Set(["waiting", "scheduled", "queued"]);
const CANCELLABLE = new Set(["waiting", "scheduled", "queued", "claimed", "running"]);

export function JobDetailPage({ jobId }: { jobId: string }) {
  const projectId = useProjectId();
  const { can } = useSession();
  const now = useNow();
  const path = { project_id: projectId, job_id: Number(jobId) };
  const [running, setRunning] = useState(false);
  // Log lines announce no event: while the job runs, tail them every second.
  const job = useLive(
    ["job", projectId, jobId],
    () => unwrap(api.GET("/api/v1/projects/{project_id}/jobs/{job_id}", { params: { path } })),
    { liveInterval: running ? 1000 : false },
  );
  const isRunning = job.data ? LEASED.has(job.data.status) : false;
  useEffect(() => setRunning(isRunning), [isRunning]);
  // Attempts name their worker by id; the workers list gives host:pid.
  const workers = useLive(
    ["workers"],
    () => unwrap(api.GET("/api/v1/workers", { params: { query: { limit: 200 } } })),
    { interval: 30_000 },
  );
  const workerName = (id: string | null) => {
    if (!id) return null;
    const w = workers.data?.items.find((x) => x.id === id);
    return w ? `${w.hostname}:${w.pid}` : id.slice(0, 8);
  };
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
              <Item label="Concurrency key" value={j.concurrency_key ?? "—"} />
              <Item
                label="Unique key"
                value={j.unique_key ? <code title={j.unique_key}>{j.unique_key.slice(0, 19)}</code> : "—"}
              />
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
            <Json value={j.payload} testId="job-payload" />
            <div className="mt-4 mb-1 text-xs font-medium text-slate-500">Result</div>
            {j.result == null ? (
              <div className="text-sm text-slate-500">{j.finished_at ? "none" : "none yet"}</div>
            ) : (
              <Json value={j.result} testId="job-result" />
            )}
          </Card>
        </div>
        {WAITING.has(j.status) && <WhyWaiting jobId={j.id} now={now} />}
        <Card title="Timeline" padded={false} testId="job-timeline">
          <ol className="relative space-y-0 py-2" aria-label="Attempts, oldest first">
            <TimelineMark
              tone="gray"
              title="Enqueued"
              at={j.created_at}
              now={now}
              detail={j.run_at !== j.created_at ? `due ${formatDateTime(j.run_at)}` : undefined}
            />
            {j.executions.map((e) => (
              <ExecutionRow key={e.execution_seq} e={e} now={now} worker={workerName(e.worker_id)} />
            ))}
            {LEASED.has(j.status) && (
              <TimelineMark
                tone="indigo"
                title={`Try ${j.attempt} · ${j.status}`}
                at={j.started_at ?? j.claimed_at}
                now={now}
                detail={`on ${workerName(j.worker_id) ?? "a worker"} · running for ${durationBetween(
                  j.started_at ?? j.claimed_at,
                  new Date(now).toISOString(),
                )}`}
                testId="timeline-current"
              />
            )}
            {j.executions.length === 0 && !LEASED.has(j.status) && (
              <li className="px-4 py-2 text-sm text-slate-500">
                No attempt yet. Each attempt appears here with its worker, times and error.
              </li>
            )}
          </ol>
        </Card>
        <Card
          title="Logs"
          padded={false}
          testId="job-logs"
          actions={LEASED.has(j.status) && <span className="text-xs text-emerald-700">● tailing live</span>}
        >
          {j.logs.length === 0 ? (
            <EmptyState title="No log lines" hint="Handlers write log lines with their job context." />
          ) : (
            <LogBox count={j.logs.length}>
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
            </LogBox>
          )}
        </Card>
      </div>
    </div>
  );
}

const markTone: Record<string, string> = {
  gray: "bg-slate-400",
  indigo: "bg-indigo-500",
  green: "bg-emerald-500",
  red: "bg-rose-500",
  amber: "bg-amber-500",
};

function TimelineMark({
  tone,
  title,
  at,
  now,
  detail,
  children,
  testId,
}: {
  tone: keyof typeof markTone;
  title: ReactNode;
  at: string | null;
  now: number;
  detail?: ReactNode;
  children?: ReactNode;
  testId?: string;
}) {
  return (
    <li className="relative py-2 pr-4 pl-10" data-testid={testId}>
      <span aria-hidden className="absolute top-0 bottom-0 left-[1.15rem] w-px bg-slate-200" />
      <span
        aria-hidden
        className={`absolute top-3.5 left-4 size-2.5 rounded-full ring-2 ring-white ${markTone[tone]}`}
      />
      <div className="flex flex-wrap items-baseline gap-x-3 gap-y-1 text-sm">
        <span className="font-medium text-slate-900">{title}</span>
        {detail && <span className="text-slate-600">{detail}</span>}
        {at && (
          <span className="ml-auto text-xs text-slate-500" title={formatDateTime(at)}>
            {formatDateTime(at)} ({formatRelative(at, now)})
          </span>
        )}
      </div>
      {children}
    </li>
  );
}

const outcomeTone: Record<string, keyof typeof markTone> = {
  completed: "green",
  failed: "amber",
  timed_out: "amber",
  cancelled: "gray",
  lost: "red",
  released: "gray",
};

/** One attempt: who ran it, when it was claimed, started and finished, and how it ended. */
function ExecutionRow({ e, now, worker }: { e: ExecutionPublic; now: number; worker: string | null }) {
  const wait = e.claimed_at && e.started_at ? durationBetween(e.claimed_at, e.started_at) : null;
  return (
    <TimelineMark
      tone={outcomeTone[e.status] ?? "gray"}
      title={
        <span className="inline-flex items-center gap-2">
          Try {e.attempt} <StatusPill status={e.status} testId={`attempt-status-${e.execution_seq}`} />
        </span>
      }
      at={e.finished_at}
      now={now}
      detail={
        <span data-testid={`attempt-${e.execution_seq}`}>
          {worker ? `on ${worker}` : "worker unknown"} · ran {formatDuration(e.duration_ms)}
        </span>
      }
    >
      <dl className="mt-1 grid grid-cols-3 gap-x-4 text-xs text-slate-600 tabular-nums sm:max-w-xl">
        <div>
          <dt className="text-slate-500">claimed</dt>
          <dd>{e.claimed_at ? formatDateTime(e.claimed_at) : "—"}</dd>
        </div>
        <div>
          <dt className="text-slate-500">started{wait ? ` (+${wait})` : ""}</dt>
          <dd>{e.started_at ? formatDateTime(e.started_at) : "—"}</dd>
        </div>
        <div>
          <dt className="text-slate-500">finished</dt>
          <dd>{formatDateTime(e.finished_at)}</dd>
        </div>
      </dl>
      {e.error && (
        <pre className="mt-2 rounded bg-rose-50 p-2 font-mono text-xs whitespace-pre-wrap text-rose-800">{e.error}</pre>
      )}
      {e.traceback && (
        <details className="mt-1 text-xs" data-testid={`attempt-traceback-${e.execution_seq}`}>
          <summary className="cursor-pointer text-slate-600 hover:text-slate-900">Traceback</summary>
          <pre
            className="mt-1 max-h-64 overflow-auto rounded bg-slate-50 p-2 font-mono whitespace-pre text-slate-800"
            tabIndex={0}
          >
            {e.traceback}
          </pre>
        </details>
      )}
    </TimelineMark>
  );
}

/** Why a job that has not run yet is waiting: the API's answer (`GET …/jobs/{job_id}/explain`),
 * the claim's own rules applied to the job: each blocker with the facts behind it, or
 * "claimable" when nothing holds it back. Refreshed every 2 s: what blocks a job changes when
 * OTHER jobs change (the ones holding the slots), which this job's own events do not announce. */
function WhyWaiting({ jobId, now }: { jobId: number; now: number }) {
  const projectId = useProjectId();
  const explain = useLive(
    ["job", projectId, String(jobId), "explain"],
    () =>
      unwrap(
        api.GET("/api/v1/projects/{project_id}/jobs/{job_id}/explain", {
          params: { path: { project_id: projectId, job_id: jobId } },
        }),
      ),
    { liveInterval: 2000 },
  );
  return (
    <Card title="Why is it waiting?" testId="job-explain">
      {explain.error && !explain.data ? (
        <ErrorState error={explain.error} onRetry={() => void explain.refetch()} />
      ) : !explain.data ? (
        <SkeletonRows rows={2} />
      ) : (
        <ul className="space-y-2 text-sm text-slate-700">
          {explain.data.blockers.map((b) => (
            <li key={b.code} data-testid={`blocker-${b.code}`} className="flex flex-wrap items-baseline gap-2">
              <Badge tone={b.code === "claimable" ? "green" : "amber"}>{BLOCKER_LABELS[b.code] ?? b.code}</Badge>
              <span>{b.message}</span>
              <BlockerFacts blocker={b} now={now} />
            </li>
          ))}
        </ul>
      )}
    </Card>
  );
}

const BLOCKER_LABELS: Record<string, string> = {
  queue_paused: "queue paused",
  scheduled: "scheduled",
  waiting_on_dependencies: "waiting on dependencies",
  concurrency_limit_full: "concurrency limit full",
  key_limit_full: "key limit full",
  rate_limited: "rate limited",
  fair_share: "fair share",
  no_live_worker: "no live worker",
  handler_not_registered: "handler not registered",
  claimable: "claimable",
};

/** The data behind a blocker, in words: the jobs holding the slots (links), when the next
 * start or the run comes, the other projects' counts. */
function BlockerFacts({ blocker, now }: { blocker: JobBlocker; now: number }) {
  const d = blocker.data as Record<string, unknown>;
  const ids = Array.isArray(d.job_ids) ? (d.job_ids as number[]) : [];
  const at = (typeof d.next_slot_at === "string" && d.next_slot_at) || (typeof d.run_at === "string" && d.run_at);
  const others = Array.isArray(d.others) ? (d.others as { in_flight: number; weight: number }[]) : [];
  return (
    <span className="flex flex-wrap items-baseline gap-2 text-slate-500">
      {ids.length > 0 && (
        <span>
          {blocker.code === "waiting_on_dependencies" ? "on " : "held by "}
          {ids.map((id, i) => (
            <span key={id}>
              {i > 0 && ", "}
              <Link to="/jobs/$jobId" params={{ jobId: String(id) }} className="text-indigo-600 hover:underline">
                #{id}
              </Link>
            </span>
          ))}
        </span>
      )}
      {at && (
        <span data-testid="blocker-at" title={formatDateTime(at)}>
          {blocker.code === "rate_limited" ? "next start " : ""}
          {formatRelative(at, now)}
        </span>
      )}
      {blocker.code === "claimable" && typeof d.ahead === "number" && (
        <span>{d.ahead === 0 ? "next in its queue" : `${d.ahead} job${d.ahead === 1 ? "" : "s"} ahead`}</span>
      )}
      {others.length > 0 && (
        <span>other projects: {others.map((o) => `${o.in_flight} running (weight ${o.weight})`).join(", ")}</span>
      )}
    </span>
  );
}

/** The log box keeps to the bottom while new lines arrive, unless the reader scrolled up. */
function LogBox({ count, children }: { count: number; children: ReactNode }) {
  const ref = useRef<HTMLDivElement>(null);
  const pinned = useRef(true);
  useEffect(() => {
    const el = ref.current;
    if (el && pinned.current) el.scrollTop = el.scrollHeight;
  }, [count]);
  return (
    <div
      ref={ref}
      onScroll={(e) => {
        const el = e.currentTarget;
        pinned.current = el.scrollHeight - el.scrollTop - el.clientHeight < 8;
      }}
      className="max-h-80 overflow-auto font-mono text-xs"
      tabIndex={0}
      role="log"
      aria-label="Log lines"
    >
      {children}
    </div>
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
