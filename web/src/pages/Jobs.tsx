import { keepPreviousData, useInfiniteQuery } from "@tanstack/react-query";
import { Link, useNavigate } from "@tanstack/react-router";
import { createColumnHelper, type RowSelectionState } from "@tanstack/react-table";
import { type FormEvent, useEffect, useState } from "react";

import { api, unwrap } from "../api/client";
import { ApiError } from "../api/errors";
import { pollInterval, useAction, useLive } from "../api/hooks";
import { useLiveStatus } from "../api/live";
import { JOB_STATUSES, type JobPublic, type JobStatus, type JobsFilter } from "../api/types";
import { useProjectId, useSession } from "../lib/session";
import { formatDateTime, formatRelative } from "../lib/time";
import { useNow } from "../lib/useNow";
import { StatusPill } from "../ui/Badge";
import { type BulkChoice, BulkActions, selectColumn } from "../ui/BulkActions";
import { Button } from "../ui/Button";
import { Card } from "../ui/Card";
import { Dialog } from "../ui/Dialog";
import { Checkbox, Field, Input, Select, TextArea } from "../ui/Field";
import { PageHeader } from "../ui/PageHeader";
import { EmptyState, InlineError } from "../ui/States";
import { DataTable } from "../ui/Table";

const RANGES = { "15m": 15 * 60_000, "1h": 3_600_000, "24h": 86_400_000, "7d": 7 * 86_400_000 } as const;
type Range = keyof typeof RANGES;

export interface JobSearch {
  queue?: string;
  status?: JobStatus;
  handler?: string;
  range?: Range;
  q?: string;
  payload?: string;
  error?: string;
}

/** The filters live in the URL, so a reload or a return from login lands on the same view. */
export function parseJobSearch(search: Record<string, unknown>): JobSearch {
  const str = (v: unknown) => (typeof v === "string" && v ? v : undefined);
  const status = str(search.status);
  const range = str(search.range);
  return {
    queue: str(search.queue),
    status: status && (JOB_STATUSES as readonly string[]).includes(status) ? (status as JobStatus) : undefined,
    handler: str(search.handler),
    range: range && range in RANGES ? (range as Range) : undefined,
    q: str(search.q),
    payload: str(search.payload),
    error: str(search.error),
  };
}

const col = createColumnHelper<JobPublic>();

type JobBulkAction = "retry" | "cancel" | "delete";
const JOB_BULK_CHOICES: BulkChoice<JobBulkAction>[] = [
  { action: "retry", label: "Retry", what: "Failed, dead-lettered and cancelled jobs run again; others are skipped." },
  {
    action: "cancel",
    label: "Cancel",
    what: "Jobs not started yet are cancelled; running ones are asked to stop. Finished jobs are skipped.",
    danger: true,
  },
  {
    action: "delete",
    label: "Delete",
    what: "Finished jobs (completed, cancelled, dead-lettered) are deleted with their history; others are skipped.",
    danger: true,
  },
];

/** The list's query filters for this URL search (the bulk action and the count take the same). */
function jobsFilter(search: JobSearch): JobsFilter {
  return {
    queue: search.queue,
    status: search.status ? [search.status] : undefined,
    handler: search.handler,
    // A sliding window: each poll asks for "the last hour" as of now.
    created_after: search.range ? new Date(Date.now() - RANGES[search.range]).toISOString() : undefined,
    q: search.q,
    payload: search.payload,
    error: search.error,
  };
}

export function JobsPage({ search }: { search: JobSearch }) {
  const projectId = useProjectId();
  const { can } = useSession();
  const navigate = useNavigate();
  const now = useNow(5000);
  const liveStatus = useLiveStatus();
  const [enqueueOpen, setEnqueueOpen] = useState(false);
  const [text, setText] = useState(search.q ?? "");
  useEffect(() => setText(search.q ?? ""), [search.q]);
  const queues = useLive(["queues", projectId], () =>
    unwrap(
      api.GET("/api/v1/projects/{project_id}/queues", {
        params: { path: { project_id: projectId }, query: { limit: 200 } },
      }),
    ),
  );

  const jobs = useInfiniteQuery({
    queryKey: ["jobs", projectId, search],
    initialPageParam: undefined as string | undefined,
    queryFn: ({ pageParam }) =>
      unwrap(
        api.GET("/api/v1/projects/{project_id}/jobs", {
          params: {
            path: { project_id: projectId },
            query: {
              ...jobsFilter(search),
              cursor: pageParam,
              limit: 50,
            },
          },
        }),
      ),
    getNextPageParam: (last) => last.next_cursor ?? undefined,
    refetchInterval: pollInterval(liveStatus),
    placeholderData: keepPreviousData,
  });
  const rows = jobs.data?.pages.flatMap((p) => p.items);
  const canAct = can("member");
  const [selection, setSelection] = useState<RowSelectionState>({});
  const [allMatching, setAllMatching] = useState(false);
  const clearSelection = () => {
    setSelection({});
    setAllMatching(false);
  };
  // A new filter is a new set of rows: what was selected under the old one is dropped.
  const searchKey = JSON.stringify(search);
  useEffect(clearSelection, [searchKey]);
  const selected = Object.keys(selection).filter((id) => selection[id]);
  const matching = useLive(
    ["jobs", projectId, search, "count"],
    () =>
      unwrap(
        api.GET("/api/v1/projects/{project_id}/jobs/count", {
          params: { path: { project_id: projectId }, query: jobsFilter(search) },
        }),
      ),
    { enabled: canAct && (selected.length > 0 || allMatching) },
  );
  const startBulk = (action: JobBulkAction) =>
    unwrap(
      api.POST("/api/v1/projects/{project_id}/jobs/bulk-actions", {
        params: { path: { project_id: projectId } },
        body: allMatching ? { action, filter: jobsFilter(search) } : { action, ids: selected.map(Number) },
      }),
    );

  const setFilter = (patch: Partial<JobSearch>) => void navigate({ to: "/jobs", search: { ...search, ...patch } });

  function submitSearch(event: FormEvent) {
    event.preventDefault();
    setFilter({ q: text.trim() || undefined });
  }

  const columns = [
    ...(canAct
      ? [
          selectColumn<JobPublic>({
            pageLabel: "Select all jobs on this page",
            pageTestId: "jobs-select-page",
            rowLabel: (job) => `Select job ${job.id}`,
            rowTestId: (job) => `job-select-${job.id}`,
            allMatching,
            onAllMatching: setAllMatching,
          }),
        ]
      : []),
    col.accessor("id", {
      header: "Job",
      meta: { numeric: true },
      cell: (c) => (
        <Link
          to="/jobs/$jobId"
          params={{ jobId: String(c.getValue()) }}
          className="font-medium text-indigo-600 hover:underline"
          data-testid={`job-link-${c.getValue()}`}
        >
          #{c.getValue()}
        </Link>
      ),
    }),
    col.accessor("status", {
      header: "Status",
      cell: (c) => <StatusPill status={c.getValue()} testId={`job-status-${c.row.original.id}`} />,
    }),
    col.accessor("queue_name", { header: "Queue" }),
    col.accessor("handler", {
      header: "Handler",
      cell: (c) => <code className="text-xs text-slate-700">{c.getValue()}</code>,
    }),
    col.display({
      id: "attempts",
      header: "Attempts",
      meta: { numeric: true, hideOnMobile: true },
      cell: (c) => `${c.row.original.attempt} / ${c.row.original.max_attempts}`,
    }),
    col.accessor("priority", { header: "Priority", meta: { numeric: true, hideOnMobile: true } }),
    col.accessor("idempotency_key", {
      header: "Idempotency key",
      meta: { hideOnMobile: true },
      cell: (c) => (
        <span className="inline-block max-w-40 truncate align-bottom text-slate-500">{c.getValue() ?? "—"}</span>
      ),
    }),
    col.accessor("created_at", {
      header: "Created",
      meta: { hideOnMobile: true },
      cell: (c) => <span title={formatDateTime(c.getValue())}>{formatRelative(c.getValue(), now)}</span>,
    }),
  ];

  return (
    <div data-testid="page-jobs">
      <PageHeader
        title="Jobs"
        description="Filter, search and inspect jobs; the list updates live."
        actions={
          can("member") && (
            <Button variant="primary" data-testid="enqueue-open" onClick={() => setEnqueueOpen(true)}>
              Enqueue job
            </Button>
          )
        }
      />
      <Card className="mb-4">
        <div className="grid gap-3 sm:grid-cols-2 lg:grid-cols-[1fr_1fr_1fr_1fr_1.5fr_1.5fr_2fr]">
          <Select
            aria-label="Queue"
            data-testid="filter-queue"
            value={search.queue ?? ""}
            onChange={(e) => setFilter({ queue: e.target.value || undefined })}
          >
            <option value="">All queues</option>
            {queues.data?.items.map((q) => (
              <option key={q.id} value={q.name}>
                {q.name}
              </option>
            ))}
          </Select>
          <Select
            aria-label="Status"
            data-testid="filter-status"
            value={search.status ?? ""}
            onChange={(e) => setFilter({ status: (e.target.value || undefined) as JobStatus | undefined })}
          >
            <option value="">All statuses</option>
            {JOB_STATUSES.map((s) => (
              <option key={s} value={s}>
                {s.replace("_", " ")}
              </option>
            ))}
          </Select>
          <Input
            aria-label="Handler"
            placeholder="Handler"
            data-testid="filter-handler"
            key={search.handler ?? ""} // re-read the URL when it changes (back button, links)
            defaultValue={search.handler ?? ""}
            onBlur={(e) => setFilter({ handler: e.target.value.trim() || undefined })}
            onKeyDown={(e) => e.key === "Enter" && setFilter({ handler: e.currentTarget.value.trim() || undefined })}
          />
          <Select
            aria-label="Time range"
            data-testid="filter-range"
            value={search.range ?? ""}
            onChange={(e) => setFilter({ range: (e.target.value || undefined) as Range | undefined })}
          >
            <option value="">Any time</option>
            <option value="15m">Last 15 minutes</option>
            <option value="1h">Last hour</option>
            <option value="24h">Last 24 hours</option>
            <option value="7d">Last 7 days</option>
          </Select>
          <Input
            aria-label="Payload search, path = value"
            placeholder="payload: customer_id = 42"
            data-testid="filter-payload"
            key={`p-${search.payload ?? ""}`}
            defaultValue={search.payload ?? ""}
            onKeyDown={(e) => e.key === "Enter" && setFilter({ payload: e.currentTarget.value.trim() || undefined })}
            onBlur={(e) => setFilter({ payload: e.target.value.trim() || undefined })}
          />
          <Input
            aria-label="Error text search"
            placeholder="error contains words…"
            data-testid="filter-error"
            key={`e-${search.error ?? ""}`}
            defaultValue={search.error ?? ""}
            onKeyDown={(e) => e.key === "Enter" && setFilter({ error: e.currentTarget.value.trim() || undefined })}
            onBlur={(e) => setFilter({ error: e.target.value.trim() || undefined })}
          />
          <form onSubmit={submitSearch} className="flex gap-2">
            <Input
              aria-label="Search by id or idempotency key"
              placeholder="Job id or idempotency key"
              data-testid="job-search"
              value={text}
              onChange={(e) => setText(e.target.value)}
            />
            <Button type="submit">Search</Button>
          </form>
        </div>
      </Card>
      {canAct && (
        <BulkActions
          projectId={projectId}
          noun="job"
          selectedCount={selected.length}
          matchingCount={matching.data?.count}
          allMatching={allMatching}
          onAllMatching={setAllMatching}
          onClear={clearSelection}
          choices={JOB_BULK_CHOICES}
          start={startBulk}
          invalidate={[
            ["jobs", projectId],
            ["overview", projectId],
          ]}
        />
      )}
      <Card padded={false}>
        <DataTable
          testId="jobs-table"
          label="Jobs"
          onRowActivate={(j) => void navigate({ to: "/jobs/$jobId", params: { jobId: String(j.id) } })}
          columns={columns}
          data={rows}
          getRowId={(j) => String(j.id)}
          rowTestId={(j) => `job-row-${j.id}`}
          loading={jobs.isLoading}
          error={jobs.error}
          onRetry={() => void jobs.refetch()}
          empty={<EmptyState title="No jobs match" hint="Change the filters, or enqueue a job." />}
          rowSelection={canAct ? selection : undefined}
          onRowSelectionChange={canAct ? setSelection : undefined}
        />
        {jobs.hasNextPage && (
          <div className="flex justify-center border-t border-slate-100 p-3">
            <Button data-testid="load-more" busy={jobs.isFetchingNextPage} onClick={() => void jobs.fetchNextPage()}>
              Load more
            </Button>
          </div>
        )}
      </Card>
      {enqueueOpen && (
        <EnqueueDialog
          queues={queues.data?.items.map((q) => q.name) ?? []}
          defaultQueue={search.queue}
          onClose={() => setEnqueueOpen(false)}
        />
      )}
    </div>
  );
}

/** Parse the payload text; the message says where the JSON went wrong. */
export function parsePayload(text: string): { ok: true; value: unknown } | { ok: false; message: string } {
  if (!text.trim()) return { ok: true, value: {} };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (err) {
    return { ok: false, message: `Invalid JSON: ${err instanceof Error ? err.message : String(err)}` };
  }
}

function EnqueueDialog({
  queues,
  defaultQueue,
  onClose,
}: {
  queues: string[];
  defaultQueue?: string;
  onClose: () => void;
}) {
  const projectId = useProjectId();
  const navigate = useNavigate();
  const [queue, setQueue] = useState(defaultQueue ?? queues[0] ?? "");
  const [handler, setHandler] = useState("noop");
  const [payload, setPayload] = useState("{\n  \n}");
  const [priority, setPriority] = useState("0");
  const [delay, setDelay] = useState("");
  const [key, setKey] = useState("");
  const [concurrencyKey, setConcurrencyKey] = useState("");
  const [uniqueFor, setUniqueFor] = useState("");
  const [uniqueKey, setUniqueKey] = useState("");
  const [uniqueStates, setUniqueStates] = useState<JobStatus[]>([]);
  const [parseError, setParseError] = useState<string | null>(null);

  const enqueue = useAction(
    (value: unknown) =>
      unwrap(
        api.POST("/api/v1/projects/{project_id}/jobs", {
          params: { path: { project_id: projectId } },
          body: {
            queue,
            handler,
            payload: value,
            priority: Number(priority),
            delay_s: delay ? Number(delay) : null,
            idempotency_key: key || null,
            concurrency_key: concurrencyKey || null,
            unique_for_s: uniqueFor ? Number(uniqueFor) : null,
            // Only with unique_for_s (the API refuses them without it).
            unique_key: uniqueFor && uniqueKey ? uniqueKey : null,
            unique_states: uniqueFor && uniqueStates.length > 0 ? uniqueStates : null,
          },
        }),
      ),
    [["jobs", projectId]],
    (job) => {
      onClose();
      void navigate({ to: "/jobs/$jobId", params: { jobId: String(job.id) } });
    },
  );
  const err = enqueue.error instanceof ApiError ? enqueue.error : null;
  const fieldErr = (f: string) => err?.fieldMessage(f) ?? null;
  const payloadErr =
    parseError ??
    fieldErr("payload") ??
    (err && ["payload_too_large", "invalid_payload"].includes(err.code) ? err.message : null);
  const known = [
    "queue",
    "handler",
    "payload",
    "priority",
    "delay_s",
    "idempotency_key",
    "concurrency_key",
    "unique_for_s",
    "unique_key",
    "unique_states",
  ];

  function submit(event: FormEvent) {
    event.preventDefault();
    const parsed = parsePayload(payload);
    if (!parsed.ok) {
      setParseError(parsed.message);
      return;
    }
    setParseError(null);
    enqueue.mutate(parsed.value);
  }

  return (
    <Dialog
      open
      testId="enqueue-dialog"
      title="Enqueue a job"
      onClose={onClose}
      footer={
        <>
          <Button onClick={onClose}>Cancel</Button>
          <Button
            variant="primary"
            type="submit"
            form="enqueue-form"
            busy={enqueue.isPending}
            data-testid="enqueue-submit"
          >
            Enqueue
          </Button>
        </>
      }
    >
      <form id="enqueue-form" onSubmit={submit} className="space-y-4">
        <div className="grid gap-4 sm:grid-cols-2">
          <Field
            label="Queue"
            name="queue"
            error={fieldErr("queue") ?? (err?.code === "not_found" ? err.message : null)}
          >
            {({ id, invalid }) => (
              <Select
                id={id}
                invalid={invalid}
                data-testid="enqueue-queue"
                value={queue}
                onChange={(e) => setQueue(e.target.value)}
              >
                {queues.map((q) => (
                  <option key={q} value={q}>
                    {q}
                  </option>
                ))}
              </Select>
            )}
          </Field>
          <Field label="Handler" name="handler" error={fieldErr("handler")}>
            {({ id, invalid }) => (
              <Input
                id={id}
                invalid={invalid}
                data-testid="enqueue-handler"
                required
                value={handler}
                onChange={(e) => setHandler(e.target.value)}
              />
            )}
          </Field>
        </div>
        <Field label="Payload (JSON)" name="payload" hint="Any JSON value, at most 64 KB." error={payloadErr}>
          {({ id, invalid, describedBy }) => (
            <TextArea
              id={id}
              invalid={invalid}
              aria-describedby={describedBy}
              data-testid="enqueue-payload"
              rows={6}
              spellCheck={false}
              value={payload}
              onChange={(e) => {
                setPayload(e.target.value);
                setParseError(null);
                enqueue.reset(); // the API's verdict was about the old text
              }}
            />
          )}
        </Field>
        <div className="grid gap-4 sm:grid-cols-3">
          <Field label="Priority" name="priority" hint="higher runs first" error={fieldErr("priority")}>
            {({ id, invalid }) => (
              <Input
                id={id}
                invalid={invalid}
                type="number"
                value={priority}
                onChange={(e) => setPriority(e.target.value)}
              />
            )}
          </Field>
          <Field label="Delay (s)" name="delay_s" error={fieldErr("delay_s")}>
            {({ id, invalid }) => (
              <Input
                id={id}
                invalid={invalid}
                type="number"
                min={0}
                step="any"
                value={delay}
                onChange={(e) => setDelay(e.target.value)}
              />
            )}
          </Field>
          <Field label="Idempotency key" name="idempotency_key" error={fieldErr("idempotency_key")}>
            {({ id, invalid }) => (
              <Input id={id} invalid={invalid} value={key} onChange={(e) => setKey(e.target.value)} />
            )}
          </Field>
        </div>
        <div className="grid gap-4 sm:grid-cols-2">
          <Field
            label="Concurrency key"
            name="concurrency_key"
            hint="shares the queue's per-key limit with jobs of the same key"
            error={fieldErr("concurrency_key")}
          >
            {({ id, invalid }) => (
              <Input
                id={id}
                invalid={invalid}
                data-testid="enqueue-concurrency-key"
                value={concurrencyKey}
                onChange={(e) => setConcurrencyKey(e.target.value)}
              />
            )}
          </Field>
          <Field
            label="Unique for (s)"
            name="unique_for_s"
            hint="return an unfinished job with the same handler and payload this recent"
            error={fieldErr("unique_for_s")}
          >
            {({ id, invalid }) => (
              <Input
                id={id}
                invalid={invalid}
                data-testid="enqueue-unique-for"
                type="number"
                min={0}
                step="any"
                value={uniqueFor}
                onChange={(e) => setUniqueFor(e.target.value)}
              />
            )}
          </Field>
        </div>
        <Field
          label="Unique key"
          name="unique_key"
          hint="with unique for: match on this key instead of a hash of handler + payload"
          error={fieldErr("unique_key")}
        >
          {({ id, invalid }) => (
            <Input
              id={id}
              invalid={invalid}
              data-testid="enqueue-unique-key"
              disabled={!uniqueFor}
              value={uniqueKey}
              onChange={(e) => setUniqueKey(e.target.value)}
            />
          )}
        </Field>
        <fieldset className="space-y-2" data-testid="enqueue-unique-states">
          <legend className="text-xs font-medium text-slate-700">Unique among jobs that are</legend>
          <div className="flex flex-wrap gap-x-4 gap-y-1">
            {JOB_STATUSES.map((status) => (
              <Checkbox
                key={status}
                label={status}
                data-testid={`enqueue-unique-state-${status}`}
                disabled={!uniqueFor}
                checked={uniqueStates.includes(status)}
                onChange={(e) =>
                  setUniqueStates((now) =>
                    e.target.checked
                      ? JOB_STATUSES.filter((s) => s === status || now.includes(s))
                      : now.filter((s) => s !== status),
                  )
                }
              />
            ))}
          </div>
          {fieldErr("unique_states") ? (
            <p data-testid="field-error-unique_states" className="text-xs text-rose-600">
              {fieldErr("unique_states")}
            </p>
          ) : (
            <p className="text-xs text-slate-500">
              With unique for. None ticked: not finished yet (waiting, scheduled, queued, claimed or running).
            </p>
          )}
        </fieldset>
        {err && !payloadErr && !known.some((f) => fieldErr(f)) && err.code !== "not_found" && (
          <InlineError error={err} />
        )}
      </form>
    </Dialog>
  );
}
