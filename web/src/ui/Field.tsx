import {
  type InputHTMLAttributes,
  type ReactNode,
  type SelectHTMLAttributes,
  type TextareaHTMLAttributes,
  useId,
} from "react";

import { cx } from "./cx";

const control =
  "block w-full rounded-md border-0 bg-white px-3 py-2 text-sm text-slate-900 shadow-sm ring-1 ring-inset placeholder:text-slate-400 focus:ring-2 focus:ring-inset focus:outline-none disabled:bg-slate-50";
const controlTone = (invalid: boolean) =>
  invalid ? "ring-rose-400 focus:ring-rose-500" : "ring-slate-300 focus:ring-indigo-600";

/** A labelled control with its hint and its error right underneath it. */
export function Field({
  label,
  hint,
  error,
  children,
  name,
}: {
  label: string;
  hint?: ReactNode;
  error?: string | null;
  name: string;
  children: (props: { id: string; invalid: boolean; describedBy?: string }) => ReactNode;
}) {
  const id = useId();
  const errId = `${id}-error`;
  return (
    <div className="space-y-1">
      <label htmlFor={id} className="block text-xs font-medium text-slate-700">
        {label}
      </label>
      {children({ id, invalid: Boolean(error), describedBy: error ? errId : undefined })}
      {error ? (
        <p id={errId} data-testid={`field-error-${name}`} className="text-xs text-rose-600">
          {error}
        </p>
      ) : (
        hint && <p className="text-xs text-slate-500">{hint}</p>
      )}
    </div>
  );
}

type Ctl = { invalid?: boolean };

export function Input({ invalid = false, className, ...rest }: InputHTMLAttributes<HTMLInputElement> & Ctl) {
  return (
    <input aria-invalid={invalid || undefined} className={cx(control, controlTone(invalid), className)} {...rest} />
  );
}

export function TextArea({ invalid = false, className, ...rest }: TextareaHTMLAttributes<HTMLTextAreaElement> & Ctl) {
  return (
    <textarea
      aria-invalid={invalid || undefined}
      className={cx(control, controlTone(invalid), "font-mono text-xs", className)}
      {...rest}
    />
  );
}

export function Select({
  invalid = false,
  className,
  children,
  ...rest
}: SelectHTMLAttributes<HTMLSelectElement> & Ctl) {
  return (
    <select
      aria-invalid={invalid || undefined}
      className={cx(control, controlTone(invalid), "pr-8", className)}
      {...rest}
    >
      {children}
    </select>
  );
}

export function Checkbox({ label, ...rest }: InputHTMLAttributes<HTMLInputElement> & { label: string }) {
  return (
    <label className="inline-flex items-center gap-2 text-sm text-slate-700">
      <input
        type="checkbox"
        className="size-4 rounded border-slate-300 text-indigo-600 focus:ring-indigo-600"
        {...rest}
      />
      {label}
    </label>
  );
}
