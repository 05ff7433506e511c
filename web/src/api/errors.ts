// The API answers every error with one envelope; this turns it into a typed exception.

export interface FieldIssue {
  loc: (string | number)[];
  msg: string;
  type: string;
}

export interface ErrorEnvelope {
  error: { code: string; message: string; details: unknown; request_id: string };
}

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: unknown;
  readonly requestId: string | null;

  constructor(status: number, code: string, message: string, details: unknown, requestId: string | null) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.details = details;
    this.requestId = requestId;
  }

  /** The message for one field of the request body, if the API named it. */
  fieldMessage(field: string): string | null {
    if (!Array.isArray(this.details)) return null;
    for (const issue of this.details as FieldIssue[]) {
      if (Array.isArray(issue?.loc) && issue.loc.map(String).includes(field)) return issue.msg;
    }
    return null;
  }
}

export function toApiError(status: number, body: unknown): ApiError {
  const envelope = body as Partial<ErrorEnvelope> | undefined;
  const err = envelope?.error;
  if (err && typeof err.code === "string") {
    return new ApiError(status, err.code, err.message ?? err.code, err.details ?? null, err.request_id ?? null);
  }
  return new ApiError(status, "http_" + status, `The server answered ${status}.`, null, null);
}

export function errorMessage(error: unknown): string {
  if (error instanceof ApiError) return error.message;
  if (error instanceof Error) return error.message;
  return "Something went wrong.";
}
