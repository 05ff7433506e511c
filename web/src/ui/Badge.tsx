import type { ReactNode } from "react";

import { cx } from "./cx";

export type Tone = "gray" | "green" | "red" | "amber" | "blue" | "indigo" | "violet";

const tones: Record<Tone, string> = {
  gray: "bg-slate-100 text-slate-700 ring-slate-500/20",
  green: "bg-emerald-50 text-emerald-700 ring-emerald-600/20",
  red: "bg-rose-50 text-rose-700 ring-rose-600/20",
  amber: "bg-amber-50 text-amber-800 ring-amber-600/20",
  blue: "bg-sky-50 text-sky-700 ring-sky-600/20",
  indigo: "bg-indigo-50 text-indigo-700 ring-indigo-600/20",
  violet: "bg-violet-50 text-violet-700 ring-violet-600/20",
};
const dots: Record<Tone, string> = {
  gray: "bg-slate-400",
  green: "bg-emerald-500",
  red: "bg-rose-500",
  amber: "bg-amber-500",
  blue: "bg-sky-500",
  indigo: "bg-indigo-500",
  violet: "bg-violet-500",
};

export function Badge({
  tone = "gray",
  dot,
  children,
  testId,
}: {
  tone?: Tone;
  dot?: boolean;
  children: ReactNode;
  testId?: string;
}) {
  return (
    <span
      data-testid={testId}
      className={cx(
        "inline-flex items-center gap-1.5 rounded-full px-2 py-0.5 text-xs font-medium whitespace-nowrap ring-1 ring-inset",
        tones[tone],
      )}
    >
      {dot && <span className={cx("size-1.5 rounded-full", dots[tone])} />}
      {children}
    </span>
  );
}

const statusTones: Record<string, Tone> = {
  waiting: "gray",
  scheduled: "violet",
  queued: "blue",
  claimed: "indigo",
  running: "indigo",
  completed: "green",
  failed: "amber",
  dead_letter: "red",
  cancelled: "gray",
  timed_out: "amber",
  lost: "amber",
  released: "gray",
  active: "green",
  draining: "amber",
  stopped: "gray",
  dead: "red",
  paused: "amber",
};

/** One colour per status, the same on every screen. */
export function StatusPill({ status, testId }: { status: string; testId?: string }) {
  return (
    <Badge tone={statusTones[status] ?? "gray"} dot testId={testId}>
      {status.replace("_", " ")}
    </Badge>
  );
}
