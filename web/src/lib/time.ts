// Timestamps are shown in the viewer's own time zone, with a relative age next to them.

const absolute = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "short",
  day: "2-digit",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
});
const shortTime = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });

export const viewerTimeZone = Intl.DateTimeFormat().resolvedOptions().timeZone;

export function formatDateTime(value: string | null | undefined): string {
  if (!value) return "—";
  return absolute.format(new Date(value));
}

export function formatClock(value: Date): string {
  return shortTime.format(value);
}

/** "3 min ago", "in 20 s": the age of a timestamp relative to `now`. */
export function formatRelative(value: string | null | undefined, now: number = Date.now()): string {
  if (!value) return "—";
  const diffMs = new Date(value).getTime() - now;
  const future = diffMs > 0;
  const span = formatSpan(Math.abs(diffMs));
  if (span === "0 s") return "just now";
  return future ? `in ${span}` : `${span} ago`;
}

/** A compact duration: "850 ms", "12 s", "4 min 3 s", "2 h 5 min", "3 d 4 h". */
export function formatSpan(ms: number): string {
  if (ms < 1000) return ms < 1 ? "0 s" : `${Math.round(ms)} ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  // Seconds matter for a young thing, not for an old one: "4 min 3 s" but "25 min".
  if (m < 10) return `${m} min ${s % 60} s`;
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  return formatSpan(ms);
}

export function durationBetween(start: string | null | undefined, end: string | null | undefined): string {
  if (!start || !end) return "—";
  return formatSpan(new Date(end).getTime() - new Date(start).getTime());
}

/** An uptime to the second ("2d 03h 04m 05s"), so a live one visibly ticks. */
export function formatUptime(totalSeconds: number): string {
  const s = Math.max(0, Math.floor(totalSeconds));
  const d = Math.floor(s / 86_400);
  const h = Math.floor((s % 86_400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const pad = (n: number) => String(n).padStart(2, "0");
  if (d > 0) return `${d}d ${pad(h)}h ${pad(m)}m ${pad(s % 60)}s`;
  if (h > 0) return `${h}h ${pad(m)}m ${pad(s % 60)}s`;
  return `${m}m ${pad(s % 60)}s`;
}
