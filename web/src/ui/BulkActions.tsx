// Bulk actions on a list screen (Jobs, Dead letters): a bar with the selection, "select all N
// matching this filter", the action buttons (each behind a confirmation dialog) and the
// progress of the bulk action the server runs in the background, with a Stop button.
import { type QueryKey, useQuery, useQueryClient } from "@tanstack/react-query";
import { type ColumnDef, createColumnHelper } from "@tanstack/react-table";
import { useEffect, useState } from "react";

import { api, unwrap } from "../api/client";
import { useAction } from "../api/hooks";
import type { BulkActionPublic } from "../api/types";
import { formatNumber } from "../lib/format";
import { Button } from "./Button";
import { Dialog } from "./Dialog";
import { InlineError } from "./States";

export interface BulkChoice<A extends string> {
  action: A;
  label: string;
  /** What the confirmation says happens to each row. */
  what: string;
  danger?: boolean;
}

const OPEN = ["pending", "running"];
const PROGRESS_POLL_MS = 500;

export function BulkActions<A extends string>({
  projectId,
  noun,
  selectedCount,
  matchingCount,
  allMatching,
  onAllMatching,
  onClear,
  choices,
  start,
  invalidate,
}: {
  projectId: string;
  noun: string;
  selectedCount: number;
  /** How many rows the current filter matches (undefined while it is counted). */
  matchingCount: number | undefined;
  allMatching: boolean;
  onAllMatching: (all: boolean) => void;
  onClear: () => void;
  choices: BulkChoice<A>[];
  /** Create the bulk action (on the selected ids, or on the filter when allMatching). */
  start: (action: A) => Promise<BulkActionPublic>;
  invalidate: QueryKey[];
}) {
  const [confirming, setConfirming] = useState<BulkChoice<A> | null>(null);
  const [runningId, setRunningId] = useState<string | null>(null);
  const client = useQueryClient();
  const count = allMatching ? (matchingCount ?? 0) : selectedCount;
  const plural = (n: number) => `${formatNumber(n)} ${noun}${n === 1 ? "" : "s"}`;

  const create = useAction(start, [["bulk-actions", projectId]], (created) => {
    setConfirming(null);
    setRunningId(created.id);
    onClear();
  });
  const progress = useQuery({
    queryKey: ["bulk-action", projectId, runningId],
    enabled: runningId !== null,
    queryFn: () =>
      unwrap(
        api.GET("/api/v1/projects/{project_id}/bulk-actions/{bulk_action_id}", {
          params: { path: { project_id: projectId, bulk_action_id: runningId ?? "" } },
        }),
      ),
    refetchInterval: (query) =>
      query.state.data && !OPEN.includes(query.state.data.status) ? false : PROGRESS_POLL_MS,
  });
  const bulk = progress.data;
  const finished = bulk !== undefined && !OPEN.includes(bulk.status);
  // The rows changed under the list: refresh it as the action advances and when it ends.
  useEffect(() => {
    if (bulk) for (const queryKey of invalidate) void client.invalidateQueries({ queryKey });
  }, [bulk?.processed, bulk?.status]);
  const stop = useAction(
    (id: string) =>
      unwrap(
        api.POST("/api/v1/projects/{project_id}/bulk-actions/{bulk_action_id}/stop", {
          params: { path: { project_id: projectId, bulk_action_id: id } },
        }),
      ),
    [["bulk-action", projectId, runningId]],
  );

  const done = bulk ? bulk.processed + bulk.skipped : 0;
  const pct = bulk && bulk.matched > 0 ? Math.min(100, Math.round((done / bulk.matched) * 100)) : finished ? 100 : 0;

  return (
    <div className="mb-3 space-y-2">
      {(selectedCount > 0 || allMatching) && (
        <div
          data-testid="bulk-bar"
          role="region"
          aria-label="Bulk actions"
          className="flex flex-wrap items-center gap-2 rounded-md bg-indigo-50 px-3 py-2 text-sm text-indigo-900 ring-1 ring-indigo-200"
        >
          <span data-testid="bulk-count" className="font-medium">
            {allMatching
              ? `All ${plural(matchingCount ?? 0)} matching this filter`
              : `${plural(selectedCount)} selected`}
          </span>
          {!allMatching && matchingCount !== undefined && matchingCount > selectedCount && (
            <Button size="sm" variant="ghost" data-testid="bulk-select-all" onClick={() => onAllMatching(true)}>
              Select all {formatNumber(matchingCount)} matching this filter
            </Button>
          )}
          <span className="flex-1" />
          {choices.map((c) => (
            <Button
              key={c.action}
              size="sm"
              variant={c.danger ? "danger" : "secondary"}
              data-testid={`bulk-${c.action}`}
              disabled={count === 0}
              onClick={() => setConfirming(c)}
            >
              {c.label}
            </Button>
          ))}
          <Button size="sm" variant="ghost" data-testid="bulk-clear" onClick={onClear}>
            Clear selection
          </Button>
        </div>
      )}
      <InlineError error={create.error ?? stop.error} />
      {bulk && (
        <div
          data-testid="bulk-progress"
          data-status={bulk.status}
          className="rounded-md bg-white px-3 py-2 text-sm ring-1 ring-slate-200"
        >
          <div className="mb-1.5 flex flex-wrap items-center gap-2">
            <span className="font-medium text-slate-900">
              Bulk {bulk.action} of {plural(bulk.matched)}: <span data-testid="bulk-status">{bulk.status}</span>
            </span>
            <span className="text-slate-600" data-testid="bulk-counts">
              {formatNumber(bulk.processed)} done, {formatNumber(bulk.skipped)} skipped
            </span>
            <span className="flex-1" />
            {!finished ? (
              <Button
                size="sm"
                variant="danger"
                data-testid="bulk-stop"
                busy={stop.isPending}
                onClick={() => stop.mutate(bulk.id)}
              >
                Stop
              </Button>
            ) : (
              <Button size="sm" variant="ghost" data-testid="bulk-dismiss" onClick={() => setRunningId(null)}>
                Dismiss
              </Button>
            )}
          </div>
          <div
            role="progressbar"
            aria-label={`Bulk ${bulk.action} progress`}
            aria-valuemin={0}
            aria-valuemax={100}
            aria-valuenow={pct}
            className="h-2 overflow-hidden rounded bg-slate-100"
          >
            <div className="h-full bg-indigo-500 transition-[width]" style={{ width: `${pct}%` }} />
          </div>
          {bulk.error && <p className="mt-1 text-rose-700">{bulk.error}</p>}
        </div>
      )}
      {confirming && (
        <Dialog
          open
          testId="bulk-confirm"
          title={`${confirming.label} ${plural(count)}?`}
          onClose={() => setConfirming(null)}
          footer={
            <>
              <Button onClick={() => setConfirming(null)}>Cancel</Button>
              <Button
                variant={confirming.danger ? "danger" : "primary"}
                data-testid="bulk-confirm-submit"
                busy={create.isPending}
                onClick={() => create.mutate(confirming.action)}
              >
                {confirming.label} {plural(count)}
              </Button>
            </>
          }
        >
          <p className="text-sm text-slate-700">{confirming.what}</p>
          {allMatching && (
            <p className="mt-2 text-sm text-slate-600">
              Every {noun} this filter matches now; {noun}s added later are not included. The server works through them
              in small batches and you can stop it at any time.
            </p>
          )}
        </Dialog>
      )}
    </div>
  );
}

/** The selection column of a list with bulk actions: a page checkbox in the header, one per
 * row. While "all N matching" is on every box shows ticked; unticking any ends that mode. */
export function selectColumn<T>({
  pageLabel,
  pageTestId,
  rowLabel,
  rowTestId,
  allMatching,
  onAllMatching,
}: {
  pageLabel: string;
  pageTestId?: string;
  rowLabel: (row: T) => string;
  rowTestId: (row: T) => string;
  allMatching: boolean;
  onAllMatching: (on: boolean) => void;
}): ColumnDef<T, unknown> {
  return createColumnHelper<T>().display({
    id: "select",
    header: ({ table }) => (
      <input
        type="checkbox"
        aria-label={pageLabel}
        data-testid={pageTestId}
        className="size-4 rounded border-slate-300"
        checked={allMatching || table.getIsAllRowsSelected()}
        onChange={(e) => {
          onAllMatching(false);
          table.toggleAllRowsSelected(e.target.checked);
        }}
      />
    ),
    cell: ({ row }) => (
      <input
        type="checkbox"
        aria-label={rowLabel(row.original)}
        data-testid={rowTestId(row.original)}
        className="size-4 rounded border-slate-300"
        checked={allMatching || row.getIsSelected()}
        onChange={(e) => {
          if (allMatching) {
            onAllMatching(false);
            return;
          }
          row.toggleSelected(e.target.checked);
        }}
      />
    ),
  });
}
