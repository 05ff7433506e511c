import { useQuery } from "@tanstack/react-query";
import { createColumnHelper } from "@tanstack/react-table";
import { type FormEvent, useState } from "react";

import { api, unwrap } from "../api/client";
import { ApiError } from "../api/errors";
import { useAction, useLive } from "../api/hooks";
import type { SchedulePublic } from "../api/types";
import { useProjectId, useSession } from "../lib/session";
import { formatDateTime, formatRelative, viewerTimeZone } from "../lib/time";
import { useDebounced } from "../lib/useDebounced";
import { useNow } from "../lib/useNow";
import { Badge } from "../ui/Badge";
import { Button } from "../ui/Button";
import { Card } from "../ui/Card";
import { Dialog } from "../ui/Dialog";
import { Checkbox, Field, Input, Select, TextArea } from "../ui/Field";
import { PageHeader } from "../ui/PageHeader";
import { EmptyState, ErrorState, InlineError, SkeletonRows } from "../ui/States";
import { DataTable } from "../ui/Table";
import { parsePayload } from "./Jobs";

const col = createColumnHelper<SchedulePublic>();

/** Errors the API raises about the expression or the zone, shown under those fields. */
const CRON_CODES = new Set(["invalid_cron", "invalid_cron_expression"]);
const TZ_CODES = new Set(["invalid_timezone", "unknown_timezone"]);

export function SchedulesPage() {
  const projectId = useProjectId();
  const { can } = useSession();
  const now = useNow(1000);
  const path = { project_id: projectId };
  const schedules = useLive(["schedules", projectId], () =>
    unwrap(api.GET("/api/v1/projects/{project_id}/schedules", { params: { path, query: { limit: 200 } } })),
  );
  const [editing, setEditing] = useState<SchedulePublic | "new" | null>(null);
  const [showing, setShowing] = useState<SchedulePublic | null>(null);
  const keys = [
    ["schedules", projectId],
    ["jobs", projectId],
  ];

  const setEnabled = useAction(
    (s: SchedulePublic) =>
      unwrap(
        s.enabled
          ? api.POST("/api/v1/projects/{project_id}/schedules/{schedule_id}/disable", {
              params: { path: { ...path, schedule_id: s.id } },
            })
          : api.POST("/api/v1/projects/{project_id}/schedules/{schedule_id}/enable", {
              params: { path: { ...path, schedule_id: s.id } },
            }),
      ),
    keys,
  );
  const trigger = useAction(
    (s: SchedulePublic) =>
      unwrap(
        api.POST("/api/v1/projects/{project_id}/schedules/{schedule_id}/trigger", {
          params: { path: { ...path, schedule_id: s.id } },
        }),
      ),
    keys,
  );
  const remove = useAction(
    (s: SchedulePublic) =>
      unwrap(
        api.DELETE("/api/v1/projects/{project_id}/schedules/{schedule_id}", {
          params: { path: { ...path, schedule_id: s.id } },
        }),
      ),
    keys,
  );

  const columns = [
    col.accessor("name", {
      header: "Schedule",
      cell: (c) => (
        <button
          type="button"
          className="text-left"
          data-testid={`schedule-open-${c.getValue()}`}
          onClick={() => setShowing(c.row.original)}
        >
          <div className="font-medium text-slate-900 hover:text-indigo-600">{c.getValue()}</div>
          <div className="text-xs text-slate-500">
            {c.row.original.handler} → {c.row.original.queue_name}
          </div>
        </button>
      ),
    }),
    col.accessor("cron_expression", {
      header: "Cron",
      cell: (c) => <code className="rounded bg-slate-100 px-1.5 py-0.5 text-xs">{c.getValue()}</code>,
    }),
    col.accessor("timezone", { header: "Zone", meta: { hideOnMobile: true } }),
    col.accessor("next_run_at", {
      header: "Next run",
      cell: (c) => (
        <span title={formatDateTime(c.getValue())} className="tabular-nums">
          {c.row.original.enabled ? (
            formatRelative(c.getValue(), now)
          ) : (
            <span className="text-slate-500">disabled</span>
          )}
        </span>
      ),
    }),
    col.accessor("last_run_at", {
      header: "Last run",
      meta: { hideOnMobile: true },
      cell: (c) => <span title={formatDateTime(c.getValue())}>{formatRelative(c.getValue(), now)}</span>,
    }),
    col.accessor("enabled", {
      header: "State",
      cell: (c) => (
        <Badge tone={c.getValue() ? "green" : "gray"} dot testId={`schedule-state-${c.row.original.name}`}>
          {c.getValue() ? "enabled" : "disabled"}
        </Badge>
      ),
    }),
    col.display({
      id: "actions",
      header: "",
      cell: (c) => {
        const s = c.row.original;
        return (
          <div className="flex justify-end gap-1.5">
            {can("member") && (
              <Button
                size="sm"
                data-testid={`trigger-${s.name}`}
                busy={trigger.isPending && trigger.variables?.id === s.id}
                onClick={() => trigger.mutate(s)}
              >
                Trigger now
              </Button>
            )}
            {can("admin") && (
              <>
                <Button size="sm" onClick={() => setEnabled.mutate(s)} data-testid={`toggle-${s.name}`}>
                  {s.enabled ? "Disable" : "Enable"}
                </Button>
                <Button size="sm" variant="ghost" onClick={() => setEditing(s)} data-testid={`edit-schedule-${s.name}`}>
                  Edit
                </Button>
                <Button
                  size="sm"
                  variant="ghost"
                  className="text-rose-600"
                  onClick={() => window.confirm(`Delete schedule "${s.name}"?`) && remove.mutate(s)}
                  data-testid={`delete-schedule-${s.name}`}
                >
                  Delete
                </Button>
              </>
            )}
          </div>
        );
      },
    }),
  ];

  return (
    <div data-testid="page-schedules">
      <PageHeader
        title="Schedules"
        description="Cron schedules enqueue a job at each fire time."
        actions={
          can("admin") && (
            <Button variant="primary" data-testid="new-schedule" onClick={() => setEditing("new")}>
              New schedule
            </Button>
          )
        }
      />
      <div className="mb-3 space-y-2">
        <InlineError error={setEnabled.error ?? trigger.error ?? remove.error} />
        {trigger.data && (
          <div
            className="rounded-md bg-emerald-50 px-3 py-2 text-sm text-emerald-800 ring-1 ring-emerald-200"
            data-testid="trigger-result"
          >
            Enqueued job #{trigger.data.job_id}.
          </div>
        )}
      </div>
      <Card padded={false}>
        <DataTable
          testId="schedules-table"
          label="Schedules"
          onRowActivate={(s) => setShowing(s)}
          columns={columns}
          data={schedules.data?.items}
          getRowId={(s) => s.id}
          rowTestId={(s) => `schedule-row-${s.name}`}
          loading={schedules.isLoading}
          error={schedules.error}
          onRetry={() => void schedules.refetch()}
          empty={
            <EmptyState
              title="No schedules"
              hint="A schedule enqueues a job on a cron expression, in a time zone of your choice."
            />
          }
        />
      </Card>
      {showing && <UpcomingDialog schedule={showing} onClose={() => setShowing(null)} />}
      {editing && <ScheduleDialog schedule={editing === "new" ? null : editing} onClose={() => setEditing(null)} />}
    </div>
  );
}

/** The next fire times of a saved schedule, as the scheduler will compute them. */
function UpcomingDialog({ schedule, onClose }: { schedule: SchedulePublic; onClose: () => void }) {
  const projectId = useProjectId();
  const upcoming = useQuery({
    queryKey: ["schedule-next", projectId, schedule.id],
    queryFn: () =>
      unwrap(
        api.GET("/api/v1/projects/{project_id}/schedules/{schedule_id}/next", {
          params: { path: { project_id: projectId, schedule_id: schedule.id }, query: { n: 10 } },
        }),
      ),
  });
  return (
    <Dialog open testId="schedule-upcoming" title={schedule.name} onClose={onClose}>
      <dl className="mb-4 grid grid-cols-2 gap-3 text-sm">
        <div>
          <dt className="text-xs text-slate-500">Cron</dt>
          <dd>
            <code className="rounded bg-slate-100 px-1.5 py-0.5 text-xs">{schedule.cron_expression}</code>
          </dd>
        </div>
        <div>
          <dt className="text-xs text-slate-500">Time zone</dt>
          <dd>{schedule.timezone}</dd>
        </div>
        <div>
          <dt className="text-xs text-slate-500">Runs</dt>
          <dd>
            <code className="text-xs">{schedule.handler}</code> on {schedule.queue_name}
          </dd>
        </div>
        <div>
          <dt className="text-xs text-slate-500">Last run</dt>
          <dd title={formatDateTime(schedule.last_run_at)}>{formatRelative(schedule.last_run_at)}</dd>
        </div>
      </dl>
      <div className="mb-1 text-xs font-medium text-slate-600">Next fire times (your time zone)</div>
      {upcoming.error ? (
        <ErrorState error={upcoming.error} onRetry={() => void upcoming.refetch()} />
      ) : !upcoming.data ? (
        <SkeletonRows rows={3} />
      ) : (
        <ol className="space-y-0.5 text-sm text-slate-700 tabular-nums" data-testid="schedule-next-times">
          {upcoming.data.next_fire_times.map((t) => (
            <li key={t}>
              {formatDateTime(t)} <span className="text-slate-500">({formatRelative(t)})</span>
            </li>
          ))}
        </ol>
      )}
    </Dialog>
  );
}

function ScheduleDialog({ schedule, onClose }: { schedule: SchedulePublic | null; onClose: () => void }) {
  const projectId = useProjectId();
  const path = { project_id: projectId };
  const queues = useLive(["queues", projectId], () =>
    unwrap(api.GET("/api/v1/projects/{project_id}/queues", { params: { path, query: { limit: 200 } } })),
  );
  const [name, setName] = useState(schedule?.name ?? "");
  const [queue, setQueue] = useState(schedule?.queue_name ?? "");
  const [cron, setCron] = useState(schedule?.cron_expression ?? "*/5 * * * *");
  const [timezone, setTimezone] = useState(schedule?.timezone ?? viewerTimeZone);
  const [handler, setHandler] = useState(schedule?.handler ?? "noop");
  const [payload, setPayload] = useState(JSON.stringify(schedule?.payload ?? {}, null, 2));
  const [enabled, setEnabled] = useState(schedule?.enabled ?? true);
  const [parseError, setParseError] = useState<string | null>(null);

  // Ask the API for the next fire times as the user types: the same parser that will run it.
  const settledCron = useDebounced(cron);
  const settledTz = useDebounced(timezone);
  const preview = useQuery({
    queryKey: ["cron-preview", projectId, settledCron, settledTz],
    queryFn: () =>
      unwrap(
        api.POST("/api/v1/projects/{project_id}/schedules/validate", {
          params: { path },
          body: { cron_expression: settledCron, timezone: settledTz, n: 5 },
        }),
      ),
    enabled: settledCron.trim().length > 0 && settledTz.trim().length > 0,
    retry: false,
  });

  const save = useAction(
    (value: unknown) => {
      const body = {
        name,
        cron_expression: cron,
        timezone,
        handler,
        payload: value,
        enabled,
        priority: schedule?.priority ?? 0,
      };
      return schedule
        ? unwrap(
            api.PATCH("/api/v1/projects/{project_id}/schedules/{schedule_id}", {
              params: { path: { ...path, schedule_id: schedule.id } },
              body,
            }),
          )
        : unwrap(
            api.POST("/api/v1/projects/{project_id}/schedules", {
              params: { path },
              body: { ...body, queue: queue || queues.data?.items[0]?.name || "" },
            }),
          );
    },
    [["schedules", projectId]],
    onClose,
  );
  const err = save.error instanceof ApiError ? save.error : null;
  const fieldErr = (f: string) => err?.fieldMessage(f) ?? null;
  const previewErr = preview.error instanceof ApiError ? preview.error : null;
  const cronError =
    fieldErr("cron_expression") ??
    (err && CRON_CODES.has(err.code) ? err.message : null) ??
    (previewErr && (CRON_CODES.has(previewErr.code) || previewErr.fieldMessage("cron_expression"))
      ? (previewErr.fieldMessage("cron_expression") ?? previewErr.message)
      : null);
  const tzError =
    fieldErr("timezone") ??
    (err && TZ_CODES.has(err.code) ? err.message : null) ??
    (previewErr && TZ_CODES.has(previewErr.code) ? previewErr.message : null);
  const known = ["name", "queue", "cron_expression", "timezone", "handler", "payload"];

  function submit(event: FormEvent) {
    event.preventDefault();
    const parsed = parsePayload(payload);
    if (!parsed.ok) {
      setParseError(parsed.message);
      return;
    }
    setParseError(null);
    save.mutate(parsed.value);
  }

  return (
    <Dialog
      open
      testId="schedule-dialog"
      title={schedule ? `Edit ${schedule.name}` : "New schedule"}
      onClose={onClose}
      footer={
        <>
          <Button onClick={onClose}>Cancel</Button>
          <Button
            variant="primary"
            type="submit"
            form="schedule-form"
            busy={save.isPending}
            data-testid="schedule-save"
          >
            {schedule ? "Save" : "Create schedule"}
          </Button>
        </>
      }
    >
      <form id="schedule-form" onSubmit={submit} className="space-y-4">
        <div className="grid gap-4 sm:grid-cols-2">
          <Field label="Name" name="name" error={fieldErr("name") ?? (err?.code === "conflict" ? err.message : null)}>
            {({ id, invalid }) => (
              <Input
                id={id}
                invalid={invalid}
                data-testid="schedule-name"
                required
                value={name}
                onChange={(e) => setName(e.target.value)}
              />
            )}
          </Field>
          <Field label="Queue" name="queue" error={fieldErr("queue")}>
            {({ id, invalid }) => (
              <Select
                id={id}
                invalid={invalid}
                disabled={Boolean(schedule)}
                data-testid="schedule-queue"
                value={queue || queues.data?.items[0]?.name || ""}
                onChange={(e) => setQueue(e.target.value)}
              >
                {queues.data?.items.map((q) => (
                  <option key={q.id} value={q.name}>
                    {q.name}
                  </option>
                ))}
              </Select>
            )}
          </Field>
        </div>
        <div className="grid gap-4 sm:grid-cols-2">
          <Field
            label="Cron expression"
            name="cron_expression"
            hint="minute hour day month weekday, e.g. */5 * * * *"
            error={cronError}
          >
            {({ id, invalid, describedBy }) => (
              <Input
                id={id}
                invalid={invalid}
                aria-describedby={describedBy}
                data-testid="schedule-cron"
                className="font-mono"
                required
                value={cron}
                onChange={(e) => {
                  setCron(e.target.value);
                  save.reset();
                }}
              />
            )}
          </Field>
          <Field label="Time zone" name="timezone" hint="IANA name, e.g. UTC or Europe/Paris" error={tzError}>
            {({ id, invalid }) => (
              <Input
                id={id}
                invalid={invalid}
                data-testid="schedule-timezone"
                required
                value={timezone}
                onChange={(e) => {
                  setTimezone(e.target.value);
                  save.reset();
                }}
              />
            )}
          </Field>
        </div>
        <div className="rounded-md bg-slate-50 p-3 text-xs ring-1 ring-slate-100" data-testid="cron-preview">
          <div className="mb-1 font-medium text-slate-600">Next fire times (your time zone)</div>
          {preview.data && settledCron === cron && settledTz === timezone && !cronError && !tzError ? (
            <ul className="space-y-0.5 text-slate-700 tabular-nums">
              {preview.data.next_fire_times.map((t) => (
                <li key={t}>
                  {formatDateTime(t)} <span className="text-slate-500">({formatRelative(t)})</span>
                </li>
              ))}
            </ul>
          ) : (
            <div className="text-slate-500">
              {preview.isFetching ? "checking…" : cronError ? "fix the expression to see its fire times" : "—"}
            </div>
          )}
        </div>
        <Field label="Handler" name="handler" error={fieldErr("handler")}>
          {({ id, invalid }) => (
            <Input id={id} invalid={invalid} required value={handler} onChange={(e) => setHandler(e.target.value)} />
          )}
        </Field>
        <Field label="Payload (JSON)" name="payload" error={parseError ?? fieldErr("payload")}>
          {({ id, invalid }) => (
            <TextArea
              id={id}
              invalid={invalid}
              rows={4}
              spellCheck={false}
              data-testid="schedule-payload"
              value={payload}
              onChange={(e) => {
                setPayload(e.target.value);
                setParseError(null);
              }}
            />
          )}
        </Field>
        <Checkbox label="Enabled" checked={enabled} onChange={(e) => setEnabled(e.target.checked)} />
        {err && !cronError && !tzError && !known.some((f) => fieldErr(f)) && err.code !== "conflict" && (
          <InlineError error={err} />
        )}
      </form>
    </Dialog>
  );
}
