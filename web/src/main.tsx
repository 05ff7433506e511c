import { QueryCache, QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { RouterProvider } from "@tanstack/react-router";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";

import { ApiError } from "./api/errors";
import { setSessionExpiredHandler } from "./api/session";
import "./index.css";
import { applyTheme, loadTheme } from "./lib/theme";
import { router } from "./router";

applyTheme(loadTheme());

const queryClient = new QueryClient({
  queryCache: new QueryCache(),
  defaultOptions: {
    queries: {
      // Client errors (403/404/422) will not fix themselves by retrying; network blips might.
      retry: (count, error) => !(error instanceof ApiError && error.status < 500) && count < 2,
      refetchOnWindowFocus: false,
    },
  },
});

// The session could not be renewed: back to login, remembering the page the user was on.
setSessionExpiredHandler(() => {
  const here = router.state.location.href;
  if (router.state.location.pathname === "/login") return;
  queryClient.clear();
  void router.navigate({ to: "/login", search: { redirect: here } });
});

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <QueryClientProvider client={queryClient}>
      <RouterProvider router={router} />
    </QueryClientProvider>
  </StrictMode>,
);
