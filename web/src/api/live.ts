// Live updates: the project's server-sent event stream (GET …/events), read with fetch so the
// request carries the session like every other call (EventSource cannot send headers).
//
// Each event invalidates the queries it concerns, so the open screen refetches within a flush
// (≤ 0.25 s on the server) instead of waiting for a poll. While the stream is up, polling is
// off; when it drops, the screens poll every 2 s again and the header says so, and the stream
// reconnects with backoff. `localStorage["codity.polling"] = "off"` disables the polling
// fallback entirely (the browser suite uses it to prove the stream alone updates the screen).
import type { QueryClient } from "@tanstack/react-query";
import { useSyncExternalStore } from "react";

import { authFetch } from "./client";

export type LiveStatus = "connecting" | "live" | "polling";

let status: LiveStatus = "connecting";
const listeners = new Set<() => void>();

function setStatus(next: LiveStatus) {
  if (next === status) return;
  status = next;
  listeners.forEach((fn) => fn());
}

export function useLiveStatus(): LiveStatus {
  return useSyncExternalStore(
    (fn) => {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    () => status,
  );
}

export const pollingDisabled = () => {
  try {
    return localStorage.getItem("codity.polling") === "off";
  } catch {
    return false;
  }
};

interface JobsEvent {
  changes: number;
  queues: Record<string, Record<string, number>>;
  job_ids: number[];
  truncated: boolean;
}

/** What each event makes stale. */
function apply(client: QueryClient, projectId: string, kind: string, data: unknown) {
  const stale = (key: unknown[]) => void client.invalidateQueries({ queryKey: key });
  switch (kind) {
    case "hello":
    case "resync":
      // Connected (again) or told we missed something: everything may be stale.
      stale(["jobs", projectId]);
      stale(["job", projectId]);
      stale(["overview", projectId]);
      stale(["queues", projectId]);
      stale(["workers"]);
      stale(["dead-letters", projectId]);
      break;
    case "jobs": {
      const event = data as JobsEvent;
      stale(["jobs", projectId]);
      stale(["overview", projectId]);
      stale(["queues", projectId]);
      stale(["dead-letters", projectId]);
      if (event.truncated) stale(["job", projectId]);
      else event.job_ids.forEach((id) => stale(["job", projectId, String(id)]));
      break;
    }
    case "workers":
      stale(["workers"]);
      stale(["overview", projectId]);
      break;
    case "queues":
      stale(["queues", projectId]);
      stale(["overview", projectId]);
      break;
  }
}

/** Read one stream until it ends; resolves normally on `bye` or end of body. */
async function readStream(
  projectId: string,
  signal: AbortSignal,
  onEvent: (kind: string, data: unknown) => void,
): Promise<void> {
  const request = new Request(`/api/v1/projects/${projectId}/events`, {
    headers: { Accept: "text/event-stream" },
    signal,
  });
  const response = await authFetch(request);
  if (!response.ok || !response.body) throw new Error(`events: HTTP ${response.status}`);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let kind = "message";
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) kind = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (!data) continue; // a keep-alive comment or the retry hint
      onEvent(kind, JSON.parse(data));
      if (kind === "bye") return;
    }
  }
}

/** Keep the project's stream open while `projectId` is shown; returns a stop function. */
export function startLiveUpdates(client: QueryClient, projectId: string): () => void {
  const controller = new AbortController();
  let failures = 0;
  setStatus("connecting");
  (async () => {
    while (!controller.signal.aborted) {
      let greeted = false;
      try {
        await readStream(projectId, controller.signal, (kind, data) => {
          if (kind === "hello") {
            greeted = true;
            failures = 0;
            setStatus("live");
          }
          apply(client, projectId, kind, data);
        });
        if (!greeted) throw new Error("events: the stream ended before it started");
      } catch {
        if (controller.signal.aborted) return;
        failures += 1;
        setStatus("polling");
      }
      if (controller.signal.aborted) return;
      // `bye` or a dropped stream: reconnect, sooner the first times.
      const delay = failures === 0 ? 0 : Math.min(10_000, 500 * 2 ** Math.min(failures, 5));
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  })();
  return () => {
    controller.abort();
    setStatus("connecting");
  };
}
