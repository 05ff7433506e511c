// The dashboard's charts (Recharts, SVG). Colours come from CSS variables, so axes, grid and
// tooltips follow the light or dark theme; series colours are mid-tones readable on both.
import type { ReactNode } from "react";
import {
  Area,
  AreaChart,
  Bar,
  BarChart,
  CartesianGrid,
  Legend,
  Line,
  LineChart,
  ResponsiveContainer,
  Tooltip,
  XAxis,
  YAxis,
} from "recharts";

import { formatClock, formatDuration } from "../lib/time";

/** Series colours (Tailwind 500/600 tones): distinguishable on white and on slate-900. */
export const SERIES = ["#6366f1", "#0ea5e9", "#f59e0b", "#10b981", "#ec4899", "#8b5cf6", "#14b8a6", "#f97316"];
export const GREEN = "#10b981";
export const RED = "#f43f5e";

const axis = { fontSize: 11, fill: "var(--chart-text)" };

function tickTime(bucketMinutes: number) {
  return (value: string) => {
    const d = new Date(value);
    if (bucketMinutes >= 60) return d.toLocaleDateString(undefined, { weekday: "short", day: "numeric" });
    return formatClock(d);
  };
}

function tooltipTime(value: unknown) {
  return new Date(String(value)).toLocaleString(undefined, {
    month: "short",
    day: "numeric",
    hour: "2-digit",
    minute: "2-digit",
  });
}

const tooltipStyle = {
  contentStyle: {
    background: "var(--chart-surface)",
    border: "1px solid var(--chart-grid)",
    borderRadius: 6,
    fontSize: 12,
    color: "var(--chart-strong)",
  },
  labelStyle: { color: "var(--chart-strong)" },
};

/** A chart with a title, a one-line summary for screen readers, and an empty note. */
export function ChartFrame({
  title,
  summary,
  testId,
  empty,
  children,
}: {
  title: string;
  summary: string;
  testId: string;
  empty?: boolean;
  children: ReactNode;
}) {
  return (
    <figure data-testid={testId} className="min-w-0" role="group" aria-label={`${title}: ${summary}`}>
      <figcaption className="mb-1 flex items-baseline justify-between gap-2">
        <span className="text-xs font-medium text-slate-700">{title}</span>
        <span className="truncate text-[11px] text-slate-500">{summary}</span>
      </figcaption>
      <div className="relative h-44">
        {children}
        {empty && (
          <div className="absolute inset-0 grid place-items-center text-xs text-slate-500">no data in this window</div>
        )}
      </div>
    </figure>
  );
}

/** A series with only a sample or two (a new install, a once-a-minute sample) is drawn as dots:
 * a line needs two points to be visible at all. */
function sparseDot(data: TimePoint[], key: string, color: string) {
  const samples = data.reduce((n, p) => n + (p[key] == null ? 0 : 1), 0);
  return samples <= 3 ? { r: 3, fill: color, stroke: color } : false;
}

export interface TimePoint {
  at: string;
  [series: string]: number | string | null;
}

export function StackedBars({
  data,
  bars,
  bucketMinutes,
}: {
  data: TimePoint[];
  bars: { key: string; name: string; color: string }[];
  bucketMinutes: number;
}) {
  return (
    <ResponsiveContainer width="100%" height="100%">
      <BarChart data={data} margin={{ top: 4, right: 4, bottom: 0, left: -16 }}>
        <CartesianGrid stroke="var(--chart-grid)" vertical={false} />
        <XAxis dataKey="at" tickFormatter={tickTime(bucketMinutes)} tick={axis} minTickGap={28} />
        <YAxis tick={axis} allowDecimals={false} width={48} />
        <Tooltip labelFormatter={tooltipTime} {...tooltipStyle} cursor={{ fill: "var(--chart-grid)" }} />
        <Legend wrapperStyle={{ fontSize: 11 }} iconSize={8} />
        {bars.map((b) => (
          <Bar key={b.key} dataKey={b.key} name={b.name} stackId="a" fill={b.color} isAnimationActive={false} />
        ))}
      </BarChart>
    </ResponsiveContainer>
  );
}

export function Lines({
  data,
  lines,
  bucketMinutes,
  durations = false,
}: {
  data: TimePoint[];
  lines: { key: string; name: string; color: string; dashed?: boolean }[];
  bucketMinutes: number;
  durations?: boolean;
}) {
  const fmt = durations ? (v: unknown) => formatDuration(Number(v)) : undefined;
  return (
    <ResponsiveContainer width="100%" height="100%">
      <LineChart data={data} margin={{ top: 4, right: 4, bottom: 0, left: -16 }}>
        <CartesianGrid stroke="var(--chart-grid)" vertical={false} />
        <XAxis dataKey="at" tickFormatter={tickTime(bucketMinutes)} tick={axis} minTickGap={28} />
        <YAxis
          tick={axis}
          width={56}
          tickFormatter={fmt}
          scale={durations ? "log" : "auto"}
          domain={durations ? ["auto", "auto"] : [0, "auto"]}
          allowDataOverflow={false}
        />
        <Tooltip labelFormatter={tooltipTime} formatter={fmt ? (v) => fmt(v) : undefined} {...tooltipStyle} />
        <Legend wrapperStyle={{ fontSize: 11 }} iconSize={8} />
        {lines.map((l) => (
          <Line
            key={l.key}
            dataKey={l.key}
            name={l.name}
            stroke={l.color}
            strokeWidth={1.75}
            strokeDasharray={l.dashed ? "4 3" : undefined}
            dot={sparseDot(data, l.key, l.color)}
            connectNulls
            isAnimationActive={false}
          />
        ))}
      </LineChart>
    </ResponsiveContainer>
  );
}

export function Areas({
  data,
  areas,
  bucketMinutes,
}: {
  data: TimePoint[];
  areas: { key: string; name: string; color: string }[];
  bucketMinutes: number;
}) {
  return (
    <ResponsiveContainer width="100%" height="100%">
      <AreaChart data={data} margin={{ top: 4, right: 4, bottom: 0, left: -16 }}>
        <CartesianGrid stroke="var(--chart-grid)" vertical={false} />
        <XAxis dataKey="at" tickFormatter={tickTime(bucketMinutes)} tick={axis} minTickGap={28} />
        <YAxis tick={axis} allowDecimals={false} width={48} />
        <Tooltip labelFormatter={tooltipTime} {...tooltipStyle} />
        <Legend wrapperStyle={{ fontSize: 11 }} iconSize={8} />
        {areas.map((a) => (
          <Area
            key={a.key}
            dataKey={a.key}
            name={a.name}
            stroke={a.color}
            fill={a.color}
            fillOpacity={0.18}
            dot={sparseDot(data, a.key, a.color)}
            connectNulls
            isAnimationActive={false}
          />
        ))}
      </AreaChart>
    </ResponsiveContainer>
  );
}
