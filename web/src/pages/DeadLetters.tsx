import { Link } from "@tanstack/react-router";
import { createColumnHelper, type RowSelectionState } from "@tanstack/react-table";
import { useState } from "react";

import { api, unwrap } from "../api/client";
import { useAction, useLive } from "../api/hooks";
import type { DeadLetterPublic } from "../api/types";
import { formatBytes, formatNumber } from "../lib/format";
import { useProjectId, useSession } from "../lib/session";
import { formatDateTime, formatRelative } from "../lib/time";
import { useNow } from "../lib/useNow";
import { Badge } from "../ui/Badge";
import { type BulkChoice, BulkActions, selectColumn } from "../ui/BulkActions";
import { Button } from "../ui/Button";
import { Card } from "../ui/Card";
import { PageHeader } from "../ui/PageHeader";
import { EmptyState, InlineError } from "../ui/States";
import { DataTable } from "../ui/Table";

const col = createColumnHelper<DeadLetterPublic>();

type DeadLetterBulkAction = "replay" | "discard";
const DL_BULK_CHOICES: BulkChoice<DeadLetterBulkAction>[] = [
  { action: "replay", label: "Replay", what: "Each job goes back to its queue with a fresh attempt budget." },
  {
    action: "discard",
    label: "Discard",
    what: "The dead letters are deleted (the jobs' own rows stay).",
    danger: true,
  },
];

export function DeadLettersPage() {
  const projectId = useProjectId();
  const { can } = useSession();
  const now = useNow(5000);
  const path = { project_id: projectId };
  const [selection, setSelection] = useState<RowSelectionState>({});
  const [notice, setNotice] = useState<string | null>(null);
  const letters = useLive(["dead-letters", projectId], () =>
    unwrap(api.GET("/api/v1/projects/{project_id}/dead-letters", { params: { path, query: { limit: 200 } } })),
  );
  const keys = [
    ["dead-letters", projectId],
    ["jobs", projectId],
    ["overview", projectId],
  ];
  const done = (text: string) => {
    setSelection({});
    setNotice(text);
  };

  const replayOne = useAction(
    (d: DeadLetterPublic) =>
      unwrap(
        api.POST("/api/v1/projects/{project_id}/dead-letters/{dead_letter_id}/replay", {
          params: { path: { ...path, dead_letter_id: d.id } },
        }),
      ),
    keys,
    (r) => done(`Replayed as job ${r.job_ids.map((id) => `#${id}`).join(", ")}.`),
  );
  const discard = useAction(
    (ids: string[]) =>
      unwrap(api.POST("/api/v1/projects/{project_id}/dead-letters/discard", { params: { path }, body: { ids } })),
    keys,
    (r) => done(`Discarded ${r.discarded} dead letter${r.discarded === 1 ? "" : "s"}.`),
  );
  const selected = Object.keys(selection).filter((id) => selection[id]);
  const canAct = can("member");
  const [allMatching, setAllMatching] = useState(false);
  const clearSelection = () => {
    setSelection({});
    setAllMatching(false);
  };
  // The list shows every pending dead letter of every queue: "all matching" is that filter.
  const startBulk = (action: DeadLetterBulkAction) =>
    unwrap(
      api.POST("/api/v1/projects/{project_id}/dead-letters/bulk-actions", {
        params: { path },
        body: allMatching ? { action, filter: { include_replayed: false } } : { action, ids: selected },
      }),
    );

  const columns = [
    ...(canAct
      ? [
          selectColumn<DeadLetterPublic>({
            pageLabel: "Select all dead letters on this page",
            rowLabel: (dl) => `Select dead letter of job ${dl.job_id ?? dl.id}`,
            rowTestId: (dl) => `dl-select-${dl.id}`,
            allMatching,
            onAllMatching: setAllMatching,
          }),
        ]
      : []),
    col.accessor("job_id", {
      header: "Job",
      meta: { numeric: true },
      cell: (c) =>
        c.getValue() == null ? (
          "—"
        ) : (
          <Link to="/jobs/$jobId" params={{ jobId: String(c.getValue()) }} className="text-indigo-600 hover:underline">
            #{c.getValue()}
          </Link>
        ),
    }),
    col.accessor("queue_name", { header: "Queue" }),
    col.accessor("handler", { header: "Handler", cell: (c) => <code className="text-xs">{c.getValue()}</code> }),
    col.accessor("error", {
      header: "Reason",
      cell: (c) => (
        <span className="inline-block max-w-[18rem] truncate align-bottom text-rose-700" title={c.getValue()}>
          {c.getValue()}
        </span>
      ),
    }),
    col.accessor("attempts", { header: "Attempts", meta: { numeric: true, hideOnMobile: true } }),
    col.accessor("payload_size", {
      header: "Payload",
      meta: { numeric: true, hideOnMobile: true },
      cell: (c) => formatBytes(c.getValue()),
    }),
    col.accessor("failed_at", {
      header: "Failed",
      meta: { hideOnMobile: true },
      cell: (c) => <span title={formatDateTime(c.getValue())}>{formatRelative(c.getValue(), now)}</span>,
    }),
    col.display({
      id: "actions",
      header: "",
      cell: (c) => {
        const d = c.row.original;
        if (d.replayed_at) return <Badge tone="green">replayed {formatRelative(d.replayed_at, now)}</Badge>;
        if (!canAct) return null;
        return (
          <div className="flex justify-end gap-1.5">
            <Button
              size="sm"
              data-testid={`dl-replay-${d.id}`}
              busy={replayOne.isPending && replayOne.variables?.id === d.id}
              onClick={() => replayOne.mutate(d)}
            >
              Replay
            </Button>
            <Button
              size="sm"
              variant="ghost"
              className="text-rose-600"
              data-testid={`dl-discard-${d.id}`}
              onClick={() => discard.mutate([d.id])}
            >
              Discard
            </Button>
          </div>
        );
      },
    }),
  ];

  const page = letters.data;
  return (
    <div data-testid="page-dead-letters">
      <PageHeader
        title="Dead letters"
        description={
          page ? `${formatNumber(page.total)} jobs exhausted their attempts.` : "Jobs that exhausted their attempts."
        }
      />
      {canAct && (
        <BulkActions
          projectId={projectId}
          noun="dead letter"
          selectedCount={selected.length}
          matchingCount={page?.total}
          allMatching={allMatching}
          onAllMatching={setAllMatching}
          onClear={clearSelection}
          choices={DL_BULK_CHOICES}
          start={startBulk}
          invalidate={keys}
        />
      )}
      <div className="mb-3 space-y-2">
        <InlineError error={replayOne.error ?? discard.error} />
        {notice && (
          <div
            data-testid="dl-notice"
            className="rounded-md bg-emerald-50 px-3 py-2 text-sm text-emerald-800 ring-1 ring-emerald-200"
          >
            {notice}
          </div>
        )}
      </div>
      {page && page.reasons.length > 0 && (
        <Card title="Top reasons" className="mb-4">
          <ul className="space-y-1.5 text-sm" data-testid="dl-reasons">
            {page.reasons.map((r) => (
              <li key={r.error} className="flex items-center justify-between gap-3">
                <span className="truncate text-slate-700" title={r.error}>
                  {r.error}
                </span>
                <span className="font-medium text-slate-900 tabular-nums">{formatNumber(r.count)}</span>
              </li>
            ))}
          </ul>
        </Card>
      )}
      <Card padded={false}>
        <DataTable
          testId="dead-letters-table"
          label="Dead letters"
          columns={columns}
          data={page?.items}
          getRowId={(d) => d.id}
          rowTestId={(d) => `dl-row-${d.id}`}
          loading={letters.isLoading}
          error={letters.error}
          onRetry={() => void letters.refetch()}
          empty={<EmptyState title="No dead letters" hint="Jobs land here after their last attempt fails." />}
          rowSelection={canAct ? selection : undefined}
          onRowSelectionChange={canAct ? setSelection : undefined}
        />
      </Card>
    </div>
  );
}
