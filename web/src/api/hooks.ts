// Shared query settings: live screens are refreshed by the project's event stream (api/live.ts)
// and fall back to a 2 s poll while it is down; the previous data stays on screen while the next
// answer arrives, so numbers update in place without flicker.
import { keepPreviousData, type QueryKey, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";

import { type LiveStatus, pollingDisabled, useLiveStatus } from "./live";

export const POLL_MS = 2000;

export interface PollOptions {
  /** A fixed interval whatever the stream does (slow-changing data), or false: never poll. */
  interval?: number | false;
  /** While the stream is up: poll this often anyway, for what no event announces (heartbeat
   * ages, log lines); default: not at all. */
  liveInterval?: number | false;
}

/** The refetch interval for a query, given the stream's state. */
export function pollInterval(status: LiveStatus, options: PollOptions = {}): number | false {
  if (pollingDisabled()) return false;
  if (options.interval !== undefined) return options.interval;
  return status === "live" ? (options.liveInterval ?? false) : POLL_MS;
}

export function useLive<T>(
  queryKey: QueryKey,
  queryFn: () => Promise<T>,
  options: PollOptions & { enabled?: boolean } = {},
) {
  const status = useLiveStatus();
  return useQuery({
    queryKey,
    queryFn,
    refetchInterval: pollInterval(status, options),
    placeholderData: keepPreviousData,
    enabled: options.enabled ?? true,
  });
}

/** A mutation that refreshes the given queries when it succeeds. */
export function useAction<TVars, TResult>(
  fn: (vars: TVars) => Promise<TResult>,
  invalidate: QueryKey[],
  onSuccess?: (result: TResult, vars: TVars) => void,
) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: fn,
    onSuccess: async (result, vars) => {
      await Promise.all(invalidate.map((queryKey) => client.invalidateQueries({ queryKey })));
      onSuccess?.(result, vars);
    },
  });
}
