import tailwindcss from "@tailwindcss/vite";
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// `npm run dev` talks to a running API through this proxy, so the browser sees one origin
// exactly as it does behind `codity web`. CODITY_API_URL overrides the default API address.
const apiUrl = process.env.CODITY_API_URL ?? "http://127.0.0.1:3000";

export default defineConfig({
  plugins: [react(), tailwindcss()],
  server: {
    port: 5173,
    proxy: {
      "/api": apiUrl,
      "/healthz": apiUrl,
      "/readyz": apiUrl,
    },
  },
  build: { sourcemap: false, chunkSizeWarningLimit: 1024 },
});
