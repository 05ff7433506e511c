// The typed API client: openapi-fetch over the generated `paths`, plus the session logic.
//
// Every request carries the access token (held in memory, see session.ts). A 401 triggers the
// shared refresh (the httpOnly cookie) and the request is replayed once with the new token; if
// the refresh fails, the session has expired and the app returns to the login page,
// remembering where the user was.
import createClient from "openapi-fetch";

import { toApiError } from "./errors";
import type { paths } from "./schema";
import { getAccessToken, refreshOnce, sessionExpired } from "./session";

function withToken(request: Request, token: string | undefined): Request {
  const headers = new Headers(request.headers);
  if (token) headers.set("Authorization", `Bearer ${token}`);
  return new Request(request, { headers });
}

const isAuthCall = (url: string) =>
  /\/api\/v1\/auth\/(login|refresh|register|verify|verify\/resend|logout)$/.test(new URL(url).pathname);

export async function authFetch(request: Request): Promise<Response> {
  const replay = request.clone();
  const sent = getAccessToken() ?? undefined;
  const response = await fetch(withToken(request, sent));
  if (response.status !== 401 || isAuthCall(request.url)) return response;
  // Another request already renewed the session while this one was in flight: use that
  // token rather than spending the refresh cookie on a second, needless rotation.
  const current = getAccessToken();
  const fresh = current && current !== sent ? current : await refreshOnce();
  if (!fresh) {
    sessionExpired();
    return response;
  }
  const retried = await fetch(withToken(replay, fresh));
  if (retried.status === 401) sessionExpired();
  return retried;
}

export const api = createClient<paths>({ baseUrl: "", fetch: authFetch });

/** Unwrap an openapi-fetch result: the data, or the API's error envelope as an ApiError. */
export async function unwrap<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await call;
  if (!response.ok) throw toApiError(response.status, error);
  return data as T;
}
