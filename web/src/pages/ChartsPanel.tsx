import { useState } from "react";

import { api, unwrap } from "../api/client";
import { useLive } from "../api/hooks";
import type { Charts, ChartWindow } from "../api/types";
import { formatNumber } from "../lib/format";
import { useProjectId } from "../lib/session";
import { formatDuration } from "../lib/time";
import { Card } from "../ui/Card";
import { Areas, ChartFrame, GREEN, Lines, RED, SERIES, StackedBars, type TimePoint } from "../ui/Charts";
import { Select } from "../ui/Field";
import { ErrorState, Skeleton } from "../ui/States";

const WINDOWS: { value: ChartWindow; label: string }[] = [
  { value: "1h", label: "Last hour" },
  { value: "24h", label: "Last 24 hours" },
  { value: "7d", label: "Last 7 days" },
];

/** Charts from the per-minute rollups: one queue or all of them, over 1 h, 24 h or 7 d. */
export function ChartsPanel({ queues, fixedQueue }: { queues?: string[]; fixedQueue?: string }) {
  const projectId = useProjectId();
  const [window, setWindow] = useState<ChartWindow>("1h");
  const [queue, setQueue] = useState<string>(fixedQueue ?? "");
  const charts = useLive(
    ["charts", projectId, window, queue],
    () =>
      unwrap(
        api.GET("/api/v1/projects/{project_id}/charts", {
          params: { path: { project_id: projectId }, query: { window, queue: queue || undefined } },
        }),
      ),
    // The rollups change once a minute: a slow poll is plenty (live events refresh it too).
    { interval: 30_000 },
  );
  return (
    <Card
      title="Charts"
      testId="charts"
      actions={
        <>
          {!fixedQueue && queues && (
            <Select
              aria-label="Chart queue"
              data-testid="charts-queue"
              className="h-8 py-1 text-xs"
              value={queue}
              onChange={(e) => setQueue(e.target.value)}
            >
              <option value="">All queues</option>
              {queues.map((q) => (
                <option key={q} value={q}>
                  {q}
                </option>
              ))}
            </Select>
          )}
          <div role="radiogroup" aria-label="Chart window" className="flex rounded-md ring-1 ring-slate-300">
            {WINDOWS.map((w) => (
              <button
                key={w.value}
                type="button"
                role="radio"
                aria-checked={window === w.value}
                data-testid={`charts-window-${w.value}`}
                title={w.label}
                onClick={() => setWindow(w.value)}
                className={
                  "px-2.5 py-1 text-xs font-medium first:rounded-l-md last:rounded-r-md focus-visible:outline-2 focus-visible:outline-indigo-600 " +
                  (window === w.value ? "bg-indigo-600 text-white" : "text-slate-600 hover:bg-slate-100")
                }
              >
                {w.value}
              </button>
            ))}
          </div>
        </>
      }
    >
      {charts.error && !charts.data ? (
        <ErrorState error={charts.error} onRetry={() => void charts.refetch()} />
      ) : !charts.data ? (
        <div className="grid gap-4 md:grid-cols-2">
          {Array.from({ length: 4 }, (_, i) => (
            <Skeleton key={i} className="h-44" />
          ))}
        </div>
      ) : (
        <ChartGrid charts={charts.data} />
      )}
    </Card>
  );
}

function ChartGrid({ charts }: { charts: Charts }) {
  const per = charts.bucket_minutes;
  const unit = per === 1 ? "per minute" : `per ${per} min`;
  const queue: TimePoint[] = charts.queue.map((p) => ({ ...p }));
  const completed = charts.queue.reduce((n, p) => n + p.completed, 0);
  const failed = charts.queue.reduce((n, p) => n + p.failed, 0);
  const lastDepth = [...charts.queue].reverse().find((p) => p.depth != null)?.depth;
  const waits = charts.queue.map((p) => p.wait_p95_ms).filter((v): v is number => v != null);

  // Run time by handler: one p50 (dashed) and one p95 line per handler, on one time axis.
  const handlerRows: TimePoint[] = charts.queue.map((p, i) => {
    const row: TimePoint = { at: p.at };
    charts.handlers.forEach((h, k) => {
      row[`p50_${k}`] = h.points[i]?.run_p50_ms ?? null;
      row[`p95_${k}`] = h.points[i]?.run_p95_ms ?? null;
    });
    return row;
  });
  // One p95 line per handler (a dozen lines would be unreadable); the table gives both.
  const handlerLines = charts.handlers.map((h, k) => ({
    key: `p95_${k}`,
    name:
      charts.handlers.filter((o) => o.handler === h.handler).length > 1 ? `${h.handler} (${h.queue_name})` : h.handler,
    color: SERIES[k % SERIES.length]!,
  }));

  const workerRows: TimePoint[] = charts.queue.map((p, i) => {
    const row: TimePoint = { at: p.at };
    charts.workers.forEach((w, k) => {
      row[`done_${k}`] = (w.points[i]?.completed ?? 0) + (w.points[i]?.failed ?? 0);
      row[`flight_${k}`] = w.points[i]?.in_flight ?? null;
    });
    return row;
  });
  const workerName = (k: number) => `${charts.workers[k]!.hostname}:${charts.workers[k]!.pid}`;

  return (
    <div className="grid gap-x-6 gap-y-5 md:grid-cols-2">
      <ChartFrame
        title={`Completed / failed ${unit}`}
        summary={`${formatNumber(completed)} completed, ${formatNumber(failed)} failed`}
        testId="chart-throughput"
        empty={completed + failed === 0}
      >
        <StackedBars
          data={queue}
          bucketMinutes={per}
          bars={[
            { key: "completed", name: "completed", color: GREEN },
            { key: "failed", name: "failed", color: RED },
          ]}
        />
      </ChartFrame>
      <ChartFrame
        title="Depth and running"
        summary={lastDepth == null ? "no sample yet" : `${formatNumber(lastDepth)} waiting now`}
        testId="chart-depth"
        empty={charts.queue.every((p) => p.depth == null)}
      >
        <Areas
          data={queue}
          bucketMinutes={per}
          areas={[
            { key: "depth", name: "depth", color: SERIES[1]! },
            { key: "running", name: "running", color: SERIES[0]! },
          ]}
        />
      </ChartFrame>
      <ChartFrame
        title="Wait (run at → start)"
        summary={waits.length ? `p95 up to ${formatDuration(Math.max(...waits))}` : "no attempt in this window"}
        testId="chart-wait"
        empty={waits.length === 0}
      >
        <Lines
          data={queue}
          bucketMinutes={per}
          durations
          lines={[
            { key: "wait_p95_ms", name: "p95", color: SERIES[2]! },
            { key: "wait_p50_ms", name: "p50", color: SERIES[2]!, dashed: true },
          ]}
        />
      </ChartFrame>
      <ChartFrame
        title="Run time p95 by handler"
        summary={`${charts.handlers.length} handler${charts.handlers.length === 1 ? "" : "s"}`}
        testId="chart-run"
        empty={charts.handlers.length === 0}
      >
        <Lines data={handlerRows} bucketMinutes={per} durations lines={handlerLines} />
      </ChartFrame>
      {charts.handlers.length > 0 && (
        <div className="md:col-span-2 overflow-x-auto">
          <table
            className="w-full text-xs"
            data-testid="handler-run-table"
            aria-label="Run time by handler over the window"
          >
            <thead>
              <tr className="text-slate-500">
                <th scope="col" className="py-1 text-left font-medium">
                  Handler
                </th>
                <th scope="col" className="py-1 text-left font-medium">
                  Queue
                </th>
                <th scope="col" className="py-1 text-right font-medium">
                  Completed
                </th>
                <th scope="col" className="py-1 text-right font-medium">
                  Failed
                </th>
                <th scope="col" className="py-1 text-right font-medium">
                  Run p50
                </th>
                <th scope="col" className="py-1 text-right font-medium">
                  Run p95
                </th>
              </tr>
            </thead>
            <tbody className="tabular-nums">
              {charts.handlers.map((h, k) => (
                <tr key={`${h.queue_id}-${h.handler}`} className="border-t border-slate-100">
                  <td className="py-1">
                    <span
                      className="mr-1.5 inline-block size-2 rounded-sm"
                      style={{ background: SERIES[k % SERIES.length] }}
                    />
                    <code>{h.handler}</code>
                  </td>
                  <td className="py-1 text-slate-600">{h.queue_name}</td>
                  <td className="py-1 text-right">{formatNumber(h.completed)}</td>
                  <td className="py-1 text-right">{formatNumber(h.failed)}</td>
                  <td className="py-1 text-right">{formatDuration(h.run_p50_ms)}</td>
                  <td className="py-1 text-right">{formatDuration(h.run_p95_ms)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <ChartFrame
        title={`Jobs ${unit} by worker`}
        summary={`${charts.workers.length} worker${charts.workers.length === 1 ? "" : "s"}`}
        testId="chart-workers"
        empty={charts.workers.length === 0}
      >
        <Lines
          data={workerRows}
          bucketMinutes={per}
          lines={charts.workers.map((_, k) => ({
            key: `done_${k}`,
            name: workerName(k),
            color: SERIES[k % SERIES.length]!,
          }))}
        />
      </ChartFrame>
      <ChartFrame
        title="In flight by worker"
        summary="sampled once a minute"
        testId="chart-in-flight"
        empty={charts.workers.length === 0}
      >
        <Lines
          data={workerRows}
          bucketMinutes={per}
          lines={charts.workers.map((_, k) => ({
            key: `flight_${k}`,
            name: workerName(k),
            color: SERIES[k % SERIES.length]!,
          }))}
        />
      </ChartFrame>
    </div>
  );
}
