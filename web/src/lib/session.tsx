// Who is signed in, with which role, and which project the dashboard is looking at.
import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { createContext, type ReactNode, useContext, useEffect, useState } from "react";

import { api, unwrap } from "../api/client";
import type { Me, Project } from "../api/types";
import { ErrorState, Skeleton } from "../ui/States";
import { type Role, roleAtLeast } from "./roles";

interface SessionValue {
  me: Me;
  role: string;
  can: (min: Role) => boolean;
  projects: Project[];
  project: Project;
  selectProject: (id: string) => void;
}

const SessionContext = createContext<SessionValue | null>(null);
const PROJECT_KEY = "codity.project";

export function SessionProvider({ children }: { children: ReactNode }) {
  // /auth/me carries the role and the org's projects; re-read now and then so a role change
  // or a new project shows up without signing in again.
  const me = useQuery({
    queryKey: ["me"],
    queryFn: () => unwrap(api.GET("/api/v1/auth/me", {})),
    refetchInterval: 15_000,
    placeholderData: keepPreviousData,
  });
  const [selected, setSelected] = useState<string | null>(() => localStorage.getItem(PROJECT_KEY));
  const list = me.data?.projects ?? [];
  const project = list.find((p) => p.id === selected) ?? list[0];

  useEffect(() => {
    if (project && project.id !== selected) setSelected(project.id);
  }, [project, selected]);

  if (me.error && !me.data) {
    return <ErrorState error={me.error} onRetry={() => void me.refetch()} />;
  }
  if (!me.data) {
    return (
      <div className="space-y-3 p-6" data-testid="loading">
        <Skeleton className="h-8 w-48" />
        <Skeleton className="h-32 w-full" />
      </div>
    );
  }
  if (!project) {
    return (
      <ErrorState
        error={new Error("This organization has no project yet. Create one with the API or `codity db demo`.")}
      />
    );
  }
  const role = me.data.role;
  const value: SessionValue = {
    me: me.data,
    role,
    can: (min) => roleAtLeast(role, min),
    projects: list,
    project,
    selectProject: (id) => {
      localStorage.setItem(PROJECT_KEY, id);
      setSelected(id);
    },
  };
  return <SessionContext.Provider value={value}>{children}</SessionContext.Provider>;
}

export function useSession(): SessionValue {
  const value = useContext(SessionContext);
  if (!value) throw new Error("useSession outside SessionProvider");
  return value;
}

export const useProjectId = () => useSession().project.id;
