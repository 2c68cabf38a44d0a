// A minimal W3C WebDriver client for the real app: starts tauri-driver (which starts
// WebKitWebDriver, which starts the app binary) and speaks the protocol with fetch.
// Node's built-ins only, so the end-to-end tests need no npm install.

import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import net from "node:net";

const ELEMENT = "element-6066-11e4-a52e-4f735466cecf";

export const APP = required("SELFRAG_APP");
export const OUT = process.env.SELFRAG_E2E_OUT ?? mkdtempSync(join(tmpdir(), "selfrag-e2e-"));

function required(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the end-to-end tests through \`cargo xtask test\``);
  return v;
}

/** Every folder `tempDir` made, removed when the test file's process exits (each file runs in
 * a process of its own): hundreds of runs had left their data and config folders in /tmp. */
const madeDirs = [];
process.on("exit", () => {
  for (const dir of madeDirs) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // An app still closing holds a file: the folder stays, as it always did.
    }
  }
});

export function tempDir(prefix) {
  const dir = mkdtempSync(join(tmpdir(), `selfrag-${prefix}-`));
  madeDirs.push(dir);
  return dir;
}

export async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on("error", reject);
  });
}

async function waitForPort(port, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const ok = await new Promise((resolve) => {
      const s = net.connect(port, "127.0.0.1", () => {
        s.end();
        resolve(true);
      });
      s.on("error", () => resolve(false));
    });
    if (ok) return;
    await sleep(100);
  }
  throw new Error(`tauri-driver did not listen on ${port} within ${ms} ms`);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Starts the app with `env` added to the environment; returns a session. */
export async function launch(env) {
  const port = await freePort();
  const nativePort = await freePort();
  const driver = spawn("tauri-driver", ["--port", String(port), "--native-port", String(nativePort)], {
    // A fresh config dir unless the test names one: no test reads or writes the user's settings.
    // A fresh XDG data dir too: GTK's list of recent files, which decides where the native
    // dialogs open (the "Recent" view cannot pick a folder by its typed path), starts empty.
    env: { ...process.env, SELFRAG_CONFIG_DIR: tempDir("config"), XDG_DATA_HOME: tempDir("xdg-data"), ...env },
    stdio: ["ignore", "inherit", "inherit"],
    // Its own process group, which WebKitWebDriver and the app join: close() ends them all,
    // so no app outlives its test holding the runner's output open.
    detached: true,
  });
  await waitForPort(port, 15000);
  const base = `http://127.0.0.1:${port}`;
  const capabilities = { alwaysMatch: { "tauri:options": { application: APP }, browserName: "wry" } };
  // tauri-driver listens before WebKitWebDriver does: on a loaded machine its first forward of
  // the new session can be refused. A refused connection is retried; any other error is not.
  const deadline = Date.now() + 20000;
  for (;;) {
    try {
      const res = await call(base, "POST", "/session", { capabilities });
      return new Session(base, res.sessionId, driver);
    } catch (e) {
      if (!(e instanceof TypeError) || Date.now() > deadline) throw e;
      await sleep(250);
    }
  }
}

async function call(base, method, path, body) {
  const r = await fetch(base + path, {
    method,
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await r.json().catch(() => ({}));
  if (!r.ok) {
    const v = json.value ?? {};
    throw new Error(`${method} ${path}: ${v.error ?? r.status}: ${v.message ?? JSON.stringify(json)}`);
  }
  return json.value;
}

export class Session {
  constructor(base, id, driver) {
    this.base = base;
    this.id = id;
    this.driver = driver;
  }

  cmd(method, path, body) {
    return call(this.base, method, `/session/${this.id}${path}`, body);
  }

  /** Runs `script` (a function body) in the webview and returns its value. */
  exec(script, ...args) {
    return this.cmd("POST", "/execute/sync", { script, args });
  }

  /** Runs async `script`; it must call `arguments[arguments.length - 1](result)`. */
  execAsync(script, ...args) {
    return this.cmd("POST", "/execute/async", { script, args });
  }

  /** An element id as a script argument. */
  ref(el) {
    return { [ELEMENT]: el };
  }

  async find(css) {
    const v = await this.cmd("POST", "/element", { using: "css selector", value: css });
    return v[ELEMENT];
  }

  async findAll(css) {
    const v = await this.cmd("POST", "/elements", { using: "css selector", value: css });
    return v.map((e) => e[ELEMENT]);
  }

  /** Waits until `css` matches an element (and `predicate(text)` holds, if given). */
  async waitFor(css, { timeout = 30000, text } = {}) {
    const deadline = Date.now() + timeout;
    let last = "";
    while (Date.now() < deadline) {
      const els = await this.findAll(css).catch(() => []);
      if (els.length > 0) {
        last = await this.text(els[0]).catch(() => "");
        if (!text || text(last)) return els[0];
      }
      await sleep(150);
    }
    throw new Error(`timed out after ${timeout} ms waiting for ${css} (last text: ${JSON.stringify(last)})`);
  }

  /** The element's rendered text (innerText). WebKitWebDriver's own text endpoint drops
   *  ellipsized spans, so it is read through script. */
  text(el) {
    return this.exec("return arguments[0].innerText;", { [ELEMENT]: el });
  }

  click(el) {
    return this.cmd("POST", `/element/${el}/click`, {});
  }

  type(el, text) {
    return this.cmd("POST", `/element/${el}/value`, { text });
  }

  /** Moves the mouse pointer to viewport point (x, y), as a person moving the mouse away. */
  movePointer(x, y) {
    return this.cmd("POST", "/actions", {
      actions: [
        {
          type: "pointer",
          id: "mouse",
          parameters: { pointerType: "mouse" },
          actions: [{ type: "pointerMove", duration: 0, x, y, origin: "viewport" }],
        },
      ],
    });
  }

  async screenshot(name) {
    const b64 = await this.cmd("GET", "/screenshot");
    mkdirSync(OUT, { recursive: true });
    const path = join(OUT, `${name}.png`);
    writeFileSync(path, Buffer.from(b64, "base64"));
    return path;
  }

  /**
   * Drags `paths` onto the window from a native drag source (tests/e2e/drag-source.py) with
   * real pointer events, so the app gets the same XDND drop a file manager gives it. The app
   * indexes only paths that reach it this way or through its own open dialogs. Resolves to
   * "ok" once the app has taken the paths, or to "error: …".
   */
  dropFiles(paths) {
    return dragOntoApp(paths);
  }

  async close() {
    await this.cmd("DELETE", "").catch(() => {});
    for (const signal of ["SIGTERM", "SIGKILL"]) {
      try {
        process.kill(-this.driver.pid, signal);
      } catch {
        return; // the group is already gone
      }
      await sleep(500);
    }
  }
}

/**
 * Answers the native save dialog titled `title` with `path` (GTK under Xvfb, via xdotool). The
 * 45 s allow for the first GTK file chooser of a cold machine: once, in a full run right after
 * the app was rebuilt, the first dialog (and the app's model loading) took more than 15 s.
 */
export function answerSaveDialog(title, path, timeout = 45000) {
  // Ctrl+A selects the suggested name; the file chooser accepts an absolute path there.
  return answerFileDialog(title, path, ["ctrl+a"], [], timeout);
}

/**
 * Answers the native open dialog titled `title` with `path`: Ctrl+L opens the chooser's
 * location field, and Return picks the file or folder it names. In folder mode the field
 * completes a folder's name with a selected "/", which Return would merely accept: Delete
 * drops it first.
 */
export function answerOpenDialog(title, path, { folder = false } = {}, timeout = 45000) {
  return answerFileDialog(title, path, ["ctrl+l"], folder ? ["Delete"] : [], timeout);
}

/** Presses `keys` in the native message dialog titled `title` (e.g. Return for its default). */
export async function answerMessageDialog(title, keys = ["Return"], timeout = 45000) {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    try {
      const ids = execFileSync("xdotool", ["search", "--onlyvisible", "--name", title], { encoding: "utf8" })
        .trim()
        .split("\n")
        .filter(Boolean);
      if (ids.length > 0) {
        await sleep(400);
        execFileSync("xdotool", ["windowfocus", "--sync", ids[ids.length - 1]]);
        for (const key of keys) {
          execFileSync("xdotool", ["key", "--clearmodifiers", key]);
          await sleep(200);
        }
        return;
      }
    } catch {
      // xdotool exits non-zero while no window matches.
    }
    await sleep(200);
  }
  throw new Error(
    `no dialog titled "${title}" appeared within ${timeout} ms; visible windows: ${JSON.stringify(visibleWindowNames())}`,
  );
}

async function answerFileDialog(title, path, firstKeys, keysBeforeReturn, timeout) {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    try {
      const ids = execFileSync("xdotool", ["search", "--onlyvisible", "--name", title], {
        encoding: "utf8",
      })
        .trim()
        .split("\n")
        .filter(Boolean);
      if (ids.length > 0) {
        const win = ids[ids.length - 1];
        await sleep(400);
        // Xvfb runs no window manager, so focus the dialog directly rather than "activate" it.
        execFileSync("xdotool", ["windowfocus", "--sync", win]);
        for (const key of firstKeys) {
          execFileSync("xdotool", ["key", "--clearmodifiers", key]);
          await sleep(300);
        }
        execFileSync("xdotool", ["type", "--delay", "5", path]);
        // The location field completes as it is typed; let it settle before Return.
        await sleep(800);
        for (const key of keysBeforeReturn) {
          execFileSync("xdotool", ["key", key]);
          await sleep(300);
        }
        execFileSync("xdotool", ["key", "Return"]);
        return;
      }
    } catch {
      // xdotool exits non-zero while no window matches.
    }
    await sleep(200);
  }
  throw new Error(
    `no dialog titled "${title}" appeared within ${timeout} ms; visible windows: ${JSON.stringify(visibleWindowNames())}`,
  );
}

/** The names of the visible X windows, for a failure message. */
/** The names of the visible X windows (for messages, and to see that no window opened). */
export function visibleWindowNames() {
  try {
    return execFileSync("xdotool", ["search", "--onlyvisible", "--name", "."], { encoding: "utf8" })
      .trim()
      .split("\n")
      .filter(Boolean)
      .map((id) => execFileSync("xdotool", ["getwindowname", id], { encoding: "utf8" }).trim());
  } catch (e) {
    return [`(xdotool failed: ${e.message})`];
  }
}

/** The geometry of the first visible X window named `name`, or null. */
function windowGeometry(name) {
  try {
    const ids = execFileSync("xdotool", ["search", "--onlyvisible", "--name", name], { encoding: "utf8" })
      .trim()
      .split("\n")
      .filter(Boolean);
    if (ids.length === 0) return null;
    const shell = execFileSync("xdotool", ["getwindowgeometry", "--shell", ids[0]], { encoding: "utf8" });
    const field = (key) => Number(new RegExp(`^${key}=(-?\\d+)$`, "m").exec(shell)?.[1]);
    return { x: field("X"), y: field("Y"), width: field("WIDTH"), height: field("HEIGHT") };
  } catch {
    return null; // xdotool exits non-zero while no window matches
  }
}

let drags = 0;

/** See `Session.dropFiles`. */
async function dragOntoApp(paths) {
  const title = `selfrag-e2e-drag-${process.pid}-${drags++}`;
  const script = join(dirname(fileURLToPath(import.meta.url)), "drag-source.py");
  // Debian's Python: python3-gi comes from apt, not from any virtual environment on PATH.
  const source = spawn("/usr/bin/python3", [script, title, ...paths], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  let errors = "";
  source.stdout.on("data", (d) => (output += d));
  source.stderr.on("data", (d) => (errors += d));
  const exited = new Promise((resolve) => source.on("exit", resolve));
  try {
    const deadline = Date.now() + 15000;
    let from = null;
    let to = null;
    while (Date.now() < deadline && !(output.includes("ready") && (from = windowGeometry(title)) && (to = windowGeometry("Self-RAG Desktop")))) {
      if (source.exitCode !== null) return `error: the drag source exited: ${errors.trim()}`;
      await sleep(100);
    }
    if (!from || !to) return `error: the drag source or the app window did not show within 15 s ${errors.trim()}`;
    const start = [from.x + Math.floor(from.width / 2), from.y + Math.floor(from.height / 2)];
    const end = [to.x + Math.floor(to.width / 2), to.y + Math.floor(to.height / 2)];
    const move = ([x, y]) => execFileSync("xdotool", ["mousemove", "--sync", String(x), String(y)]);
    move(start);
    execFileSync("xdotool", ["mousedown", "1"]);
    // Past GTK's drag threshold first, then across in steps: each motion is one XDND position.
    for (let i = 1; i <= 12; i++) {
      const t = i / 12;
      move([Math.round(start[0] - 20 + (end[0] - start[0] + 20) * t), Math.round(start[1] - 20 + (end[1] - start[1] + 20) * t)]);
      await sleep(40);
    }
    await sleep(300);
    execFileSync("xdotool", ["mouseup", "1"]);
    const ended = await Promise.race([exited.then(() => true), sleep(10000).then(() => false)]);
    if (!output.includes("sent")) return `error: the app did not take the drop ${ended ? "" : "within 10 s "}${errors.trim()}`;
    return "ok";
  } finally {
    if (source.exitCode === null) source.kill();
  }
}
