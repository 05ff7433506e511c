import type { ThroughputBucket } from "../api/types";
import { formatClock } from "../lib/time";

const W = 600;
const H = 160;

/** Completed (green) and failed (red) jobs per minute, stacked, over the last hour. */
export function ThroughputChart({ buckets }: { buckets: ThroughputBucket[] }) {
  const max = Math.max(1, ...buckets.map((b) => b.completed + b.failed));
  const ticks = niceTicks(max);
  const top = ticks[ticks.length - 1] ?? max;
  const slot = W / Math.max(1, buckets.length);
  const barW = Math.max(1, slot * 0.7);
  const labelEvery = Math.max(1, Math.round(buckets.length / 4));
  const totalCompleted = buckets.reduce((n, b) => n + b.completed, 0);
  const totalFailed = buckets.reduce((n, b) => n + b.failed, 0);
  return (
    <figure data-testid="throughput-chart" aria-label={`Last hour: ${totalCompleted} completed, ${totalFailed} failed`}>
      <div className="flex gap-2">
        <div className="flex h-40 flex-col justify-between text-right text-[10px] text-slate-500 tabular-nums">
          {[...ticks].reverse().map((t) => (
            <span key={t} className="leading-none">
              {t}
            </span>
          ))}
        </div>
        <svg viewBox={`0 0 ${W} ${H}`} preserveAspectRatio="none" className="h-40 w-full overflow-visible">
          {ticks.map((t) => (
            <line
              key={t}
              x1={0}
              x2={W}
              y1={H - (t / top) * H}
              y2={H - (t / top) * H}
              stroke="#e2e8f0"
              strokeWidth={1}
              vectorEffect="non-scaling-stroke"
            />
          ))}
          {buckets.map((b, i) => {
            const x = i * slot + (slot - barW) / 2;
            const hc = (b.completed / top) * H;
            const hf = (b.failed / top) * H;
            return (
              <g key={b.minute}>
                <title>{`${formatClock(new Date(b.minute))}: ${b.completed} completed, ${b.failed} failed`}</title>
                <rect x={x} y={H - hc} width={barW} height={hc} fill="#10b981" />
                <rect x={x} y={H - hc - hf} width={barW} height={hf} fill="#f43f5e" />
              </g>
            );
          })}
        </svg>
      </div>
      <div className="mt-1 ml-6 flex justify-between text-[10px] text-slate-500 tabular-nums">
        {buckets
          .filter((_, i) => i % labelEvery === 0)
          .map((b) => (
            <span key={b.minute}>{formatClock(new Date(b.minute))}</span>
          ))}
      </div>
      <figcaption className="mt-3 flex gap-4 text-xs text-slate-600">
        <span className="inline-flex items-center gap-1.5">
          <span className="size-2.5 rounded-sm bg-emerald-500" /> completed{" "}
          <b className="tabular-nums">{totalCompleted}</b>
        </span>
        <span className="inline-flex items-center gap-1.5">
          <span className="size-2.5 rounded-sm bg-rose-500" /> failed <b className="tabular-nums">{totalFailed}</b>
        </span>
      </figcaption>
    </figure>
  );
}

/** 0 and up to four round steps covering `max`. */
function niceTicks(max: number): number[] {
  const raw = max / 4;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? raw;
  const n = Math.ceil(max / step);
  return Array.from({ length: n + 1 }, (_, i) => Math.round(i * step));
}
