// Friendly names for the generated schema types: screens import these, never raw paths.
import type { components } from "./schema";

type S = components["schemas"];

export type Me = S["MePublic"];
export type Project = S["ProjectRef"];
export type QueuePublic = S["QueuePublic"];
export type QueueCreate = S["QueueCreate"];
export type QueueUpdate = S["QueueUpdate"];
export type QueueDepth = S["QueueDepth"];
export type RetryPolicyPublic = S["RetryPolicyPublic"];
export type ThroughputBucket = S["ThroughputBucket"];
export type Overview = S["Overview"];
export type JobPublic = S["JobPublic"];
export type JobDetail = S["JobDetail"];
export type JobCreate = S["JobCreate"];
export type ExecutionPublic = S["ExecutionPublic"];
export type JobLogPublic = S["JobLogPublic"];
export type JobBlocker = S["JobBlocker"];
export type JobExplanation = S["JobExplanation"];
export type WorkerPublic = S["WorkerPublic"];
export type SchedulePublic = S["SchedulePublic"];
export type ScheduleCreate = S["ScheduleCreate"];
export type DeadLetterPublic = S["DeadLetterPublic"];
export type ApiKeyPublic = S["ApiKeyPublic"];
export type MemberPublic = S["MemberPublic"];
export type InvitationPublic = S["InvitationPublic"];

export const JOB_STATUSES = [
  "waiting",
  "scheduled",
  "queued",
  "claimed",
  "running",
  "completed",
  "failed",
  "dead_letter",
  "cancelled",
] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];
export type Charts = S["Charts"];
export type ChartWindow = S["ChartWindow"];
export type QueuePoint = S["QueuePoint"];
export type HandlerSeries = S["HandlerSeries"];
export type WorkerSeries = S["WorkerSeries"];
export type BulkActionPublic = S["BulkActionPublic"];
export type JobsFilter = S["JobsFilter"];
