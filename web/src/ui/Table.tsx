import {
  type ColumnDef,
  flexRender,
  getCoreRowModel,
  type RowData,
  type RowSelectionState,
  type OnChangeFn,
  useReactTable,
} from "@tanstack/react-table";
import type { ReactNode } from "react";

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
}) {
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
  return (
    <div className="overflow-x-auto">
      <table data-testid={testId} className="min-w-full divide-y divide-slate-200 text-sm">
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
          {table.getRowModel().rows.map((row) => (
            <tr key={row.id} data-testid={rowTestId?.(row.original)} className="hover:bg-slate-50/60">
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
