// Every function of $lib/ipc as a bare vi.fn(), for the tests that mock the Rust side:
//   vi.mock("$lib/ipc", (real) => import("./mock-ipc").then((m) => m.mockIpc(real)));
// (vi.mock is hoisted above the imports, hence the dynamic import.) A test says what the calls
// it expects return; the list of functions is the module's own, so it cannot fall behind.

import { vi } from "vitest";

export async function mockIpc(
  importOriginal: () => Promise<Record<string, unknown>>,
): Promise<Record<string, unknown>> {
  const real = await importOriginal();
  return Object.fromEntries(Object.keys(real).map((name) => [name, vi.fn()]));
}
