// Shared query settings: every live screen polls every 2 s and keeps the previous data on
// screen while the next answer arrives, so numbers update in place without flicker.
import { keepPreviousData, type QueryKey, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";

export const POLL_MS = 2000;

export function useLive<T>(
  queryKey: QueryKey,
  queryFn: () => Promise<T>,
  options: { enabled?: boolean; interval?: number | false } = {},
) {
  return useQuery({
    queryKey,
    queryFn,
    refetchInterval: options.interval ?? POLL_MS,
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
