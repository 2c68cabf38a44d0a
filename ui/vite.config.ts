/// <reference types="vitest/config" />
import { createReadStream, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { defineConfig, type Plugin } from "vite";
import { svelte } from "@sveltejs/vite-plugin-svelte";
import { svelteTesting } from "@testing-library/svelte/vite";

/** The data pdf.js reads at run time, from the pdfjs-dist package: served under `pdfjs/`. */
const PDFJS_DATA = ["cmaps", "standard_fonts", "wasm", "iccs"];
const PDFJS_ROOT = fileURLToPath(new URL("./node_modules/pdfjs-dist/", import.meta.url));

/**
 * Copies pdf.js's data folders into the build as the app's own files (and serves them in
 * development), so the evidence viewer reads them from 'self' and nothing from the network.
 */
function pdfjsData(): Plugin {
  return {
    name: "pdfjs-data",
    generateBundle() {
      for (const folder of PDFJS_DATA) {
        for (const file of readdirSync(join(PDFJS_ROOT, folder))) {
          this.emitFile({
            type: "asset",
            fileName: `pdfjs/${folder}/${file}`,
            source: readFileSync(join(PDFJS_ROOT, folder, file)),
          });
        }
      }
    },
    configureServer(server) {
      server.middlewares.use("/pdfjs", (req, res, next) => {
        const [folder, file, ...rest] = (req.url ?? "").split("?")[0].split("/").filter(Boolean);
        const path = join(PDFJS_ROOT, folder ?? "", file ?? "");
        if (
          !PDFJS_DATA.includes(folder) ||
          !file ||
          rest.length > 0 ||
          !statSync(path, { throwIfNoEntry: false })?.isFile()
        ) {
          next();
          return;
        }
        createReadStream(path).pipe(res);
      });
    },
  };
}

// Tauri serves ui/dist from a custom protocol under a strict CSP (default-src 'self'):
// relative asset URLs, no inline scripts, nothing fetched from the network.
export default defineConfig({
  base: "./",
  plugins: [svelte(), svelteTesting(), pdfjsData()],
  resolve: {
    alias: {
      $lib: fileURLToPath(new URL("./src/lib", import.meta.url)),
    },
  },
  clearScreen: false,
  server: {
    port: 1420,
    strictPort: true,
  },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    // Keep every asset a file: inlined data: URLs would need a wider CSP.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
  },
  test: {
    environment: "jsdom",
    setupFiles: ["./src/tests/setup.ts"],
    include: ["src/**/*.test.ts"],
  },
});
