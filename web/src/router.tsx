import { createRootRoute, createRoute, createRouter, Outlet, redirect } from "@tanstack/react-router";

import { loadTokens } from "./api/session";
import { AppShell } from "./layout/AppShell";
import { DeadLettersPage } from "./pages/DeadLetters";
import { JobDetailPage } from "./pages/JobDetail";
import { JobsPage, parseJobSearch } from "./pages/Jobs";
import { LoginPage } from "./pages/Login";
import { OverviewPage } from "./pages/Overview";
import { QueuesPage } from "./pages/Queues";
import { SchedulesPage } from "./pages/Schedules";
import { SettingsPage } from "./pages/Settings";
import { WorkersPage } from "./pages/Workers";

const rootRoute = createRootRoute({ component: Outlet });

const loginRoute = createRoute({
  getParentRoute: () => rootRoute,
  path: "/login",
  validateSearch: (search: Record<string, unknown>): { redirect?: string } => ({
    redirect: typeof search.redirect === "string" ? search.redirect : undefined,
  }),
  component: function Login() {
    const { redirect: target } = loginRoute.useSearch();
    return <LoginPage redirect={target} />;
  },
});

// Everything else needs a session: without tokens, go to login and remember the page.
const appRoute = createRoute({
  getParentRoute: () => rootRoute,
  id: "app",
  beforeLoad: ({ location }) => {
    if (!loadTokens()) throw redirect({ to: "/login", search: { redirect: location.href } });
  },
  component: AppShell,
});

const overviewRoute = createRoute({ getParentRoute: () => appRoute, path: "/", component: OverviewPage });
const queuesRoute = createRoute({ getParentRoute: () => appRoute, path: "/queues", component: QueuesPage });
const workersRoute = createRoute({ getParentRoute: () => appRoute, path: "/workers", component: WorkersPage });
const schedulesRoute = createRoute({ getParentRoute: () => appRoute, path: "/schedules", component: SchedulesPage });
const deadLettersRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "/dead-letters",
  component: DeadLettersPage,
});
const settingsRoute = createRoute({ getParentRoute: () => appRoute, path: "/settings", component: SettingsPage });

const jobsRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "/jobs",
  validateSearch: parseJobSearch,
  component: function Jobs() {
    return <JobsPage search={jobsRoute.useSearch()} />;
  },
});

const jobDetailRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "/jobs/$jobId",
  component: function JobDetail() {
    const { jobId } = jobDetailRoute.useParams();
    return <JobDetailPage jobId={jobId} />;
  },
});

const routeTree = rootRoute.addChildren([
  loginRoute,
  appRoute.addChildren([
    overviewRoute,
    queuesRoute,
    jobsRoute,
    jobDetailRoute,
    workersRoute,
    schedulesRoute,
    deadLettersRoute,
    settingsRoute,
  ]),
]);

// Plain query strings (`?q=176`), not TanStack's JSON-in-the-URL: every search value this
// app keeps is a string, and plain URLs are what people paste and bookmark.
function parseSearch(query: string): Record<string, string> {
  return Object.fromEntries(new URLSearchParams(query));
}

function stringifySearch(search: Record<string, unknown>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(search)) {
    if (value !== undefined && value !== null && value !== "") params.set(key, String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

export const router = createRouter({ routeTree, defaultPreload: false, parseSearch, stringifySearch });

declare module "@tanstack/react-router" {
  interface Register {
    router: typeof router;
  }
}
