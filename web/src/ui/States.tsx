import type { ReactNode } from "react";

import { errorMessage } from "../api/errors";
import { Button } from "./Button";
import { cx } from "./cx";

export function Skeleton({ className }: { className?: string }) {
  return <div className={cx("animate-pulse rounded bg-slate-200/70", className)} />;
}

export function SkeletonRows({ rows = 4 }: { rows?: number }) {
  return (
    <div data-testid="loading" className="space-y-2 p-4">
      {Array.from({ length: rows }, (_, i) => (
        <Skeleton key={i} className="h-6 w-full" />
      ))}
    </div>
  );
}

export function EmptyState({ title, hint, action }: { title: string; hint?: ReactNode; action?: ReactNode }) {
  return (
    <div data-testid="empty-state" className="flex flex-col items-center gap-1 px-4 py-10 text-center">
      <div className="text-sm font-medium text-slate-900">{title}</div>
      {hint && <div className="max-w-sm text-sm text-slate-500">{hint}</div>}
      {action && <div className="mt-3">{action}</div>}
    </div>
  );
}

export function ErrorState({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  return (
    <div data-testid="error-state" role="alert" className="flex flex-col items-center gap-2 px-4 py-8 text-center">
      <div className="text-sm font-medium text-rose-700">Could not load this.</div>
      <div className="max-w-md text-sm text-slate-600">{errorMessage(error)}</div>
      {onRetry && (
        <Button size="sm" onClick={onRetry}>
          Try again
        </Button>
      )}
    </div>
  );
}

/** A thin banner for a failed mutation; the page stays usable. */
export function InlineError({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <div
      role="alert"
      data-testid="inline-error"
      className="rounded-md bg-rose-50 px-3 py-2 text-sm text-rose-700 ring-1 ring-rose-200"
    >
      {errorMessage(error)}
    </div>
  );
}
