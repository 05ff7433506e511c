import { Link } from "@tanstack/react-router";
import { useEffect, useRef, useState } from "react";

import { api } from "../api/client";
import { toApiError } from "../api/errors";
import { InlineError } from "../ui/States";

/** The link mailed at registration: confirms the address once, then the person signs in. */
export function VerifyEmailPage({ token }: { token?: string }) {
  const [state, setState] = useState<{ done: boolean; email?: string; error?: unknown }>({ done: false });
  const sent = useRef(false); // the link works once: StrictMode's second effect must not spend it

  useEffect(() => {
    if (sent.current) return;
    sent.current = true;
    if (!token) {
      setState({ done: true, error: new Error("This link has no token: open the link from the mail as it is.") });
      return;
    }
    void (async () => {
      const { data, error, response } = await api.POST("/api/v1/auth/verify", { body: { token } });
      setState(
        response.ok && data
          ? { done: true, email: data.email }
          : { done: true, error: toApiError(response.status, error) },
      );
    })();
  }, [token]);

  return (
    <main className="grid min-h-screen place-items-center bg-slate-100 px-4">
      <div
        className="w-full max-w-sm space-y-4 rounded-lg bg-white p-6 shadow-sm ring-1 ring-slate-200"
        data-testid="verify-email"
      >
        <h1 className="text-base font-semibold">Confirm your email address</h1>
        {!state.done && <p className="text-sm text-slate-600">Checking the link…</p>}
        {state.email && (
          <p className="text-sm text-slate-700" data-testid="verify-email-done">
            {state.email} is confirmed. You can sign in now.
          </p>
        )}
        <InlineError error={state.error} />
        {state.done && (
          <Link to="/login" search={{ redirect: undefined }} className="text-sm font-medium text-indigo-700 underline">
            Go to sign in
          </Link>
        )}
      </div>
    </main>
  );
}
