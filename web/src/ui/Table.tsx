import {
  type ColumnDef,
  flexRender,
  getCoreRowModel,
  type RowData,
  type RowSelectionState,
  type OnChangeFn,
  useReactTable,
} from "@tanstack/react-table";
import { type KeyboardEvent, type ReactNode, useState } from "react";

import { cx } from "./cx";
import { ErrorState, SkeletonRows } from "./States";

declare module "@tanstack/react-table" {
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  interface ColumnMeta<TData extends RowData, TValue> {
    /** Numbers are right-aligned with tabular figures so columns line up. */
    numeric?: boolean;
    /** Hidden below the `sm` breakpoint so a phone shows the essentials. */
    hideOnMobile?: boolean;
  }
}

export function DataTable<T>({
  columns,
  data,
  getRowId,
  rowTestId,
  loading,
  error,
  onRetry,
  empty,
  rowSelection,
  onRowSelectionChange,
  testId,
  onRowActivate,
  label,
}: {
  columns: ColumnDef<T, any>[];
  data: T[] | undefined;
  getRowId: (row: T) => string;
  rowTestId?: (row: T) => string;
  loading?: boolean;
  error?: unknown;
  onRetry?: () => void;
  empty?: ReactNode;
  rowSelection?: RowSelectionState;
  onRowSelectionChange?: OnChangeFn<RowSelectionState>;
  testId?: string;
  /** Makes rows keyboard-navigable: arrows move between rows, Enter activates the row. */
  onRowActivate?: (row: T) => void;
  /** What the table holds, for screen readers. */
  label?: string;
}) {
  const [active, setActive] = useState(0);
  const table = useReactTable({
    data: data ?? [],
    columns,
    getRowId,
    getCoreRowModel: getCoreRowModel(),
    enableRowSelection: Boolean(onRowSelectionChange),
    state: rowSelection ? { rowSelection } : {},
    onRowSelectionChange,
  });
  if (error && !data) return <ErrorState error={error} onRetry={onRetry} />;
  if (loading && !data) return <SkeletonRows />;
  if (data && data.length === 0) return <>{empty}</>;
  const rows = table.getRowModel().rows;
  const current = Math.min(active, Math.max(0, rows.length - 1));

  // Roving focus: one row is in the Tab order; the arrow keys, Home and End move between rows.
  function onKeyDown(event: KeyboardEvent<HTMLTableRowElement>, index: number, original: T) {
    if (event.target !== event.currentTarget) return; // a control inside the row has the key
    const go = (next: number) => {
      event.preventDefault();
      const bounded = Math.max(0, Math.min(rows.length - 1, next));
      setActive(bounded);
      const body = event.currentTarget.parentElement;
      (body?.children[bounded] as HTMLElement | undefined)?.focus();
    };
    if (event.key === "ArrowDown") go(index + 1);
    else if (event.key === "ArrowUp") go(index - 1);
    else if (event.key === "Home") go(0);
    else if (event.key === "End") go(rows.length - 1);
    else if (event.key === "Enter" && onRowActivate) {
      event.preventDefault();
      onRowActivate(original);
    }
  }

  return (
    <div className="overflow-x-auto">
      <table data-testid={testId} aria-label={label} className="min-w-full divide-y divide-slate-200 text-sm">
        <thead className="bg-slate-50/80">
          {table.getHeaderGroups().map((group) => (
            <tr key={group.id}>
              {group.headers.map((header) => {
                const meta = header.column.columnDef.meta;
                return (
                  <th
                    key={header.id}
                    scope="col"
                    className={cx(
                      "px-3 py-2 text-xs font-medium tracking-wide whitespace-nowrap text-slate-500 uppercase first:pl-4 last:pr-4",
                      meta?.numeric ? "text-right" : "text-left",
                      meta?.hideOnMobile && "hidden sm:table-cell",
                    )}
                  >
                    {header.isPlaceholder ? null : flexRender(header.column.columnDef.header, header.getContext())}
                  </th>
                );
              })}
            </tr>
          ))}
        </thead>
        <tbody className="divide-y divide-slate-100 bg-white">
          {rows.map((row, index) => (
            <tr
              key={row.id}
              data-testid={rowTestId?.(row.original)}
              tabIndex={onRowActivate ? (index === current ? 0 : -1) : undefined}
              onKeyDown={onRowActivate ? (e) => onKeyDown(e, index, row.original) : undefined}
              onFocus={onRowActivate ? () => setActive(index) : undefined}
              className="hover:bg-slate-50/60 focus-visible:bg-indigo-50/60 focus-visible:outline-offset-[-2px]"
            >
              {row.getVisibleCells().map((cell) => {
                const meta = cell.column.columnDef.meta;
                return (
                  <td
                    key={cell.id}
                    className={cx(
                      "px-3 py-2.5 align-middle whitespace-nowrap text-slate-700 first:pl-4 last:pr-4",
                      meta?.numeric && "text-right tabular-nums",
                      meta?.hideOnMobile && "hidden sm:table-cell",
                    )}
                  >
                    {flexRender(cell.column.columnDef.cell, cell.getContext())}
                  </td>
                );
              })}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
