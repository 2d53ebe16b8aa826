// GitMemThreadStore: kaboo's ThreadStore kept in a gitmem repository (plain git).
//
// It runs `gitmem serve --repo PATH` as a child process and speaks newline-delimited
// JSON-RPC 2.0 with it (`threads.*`). Every write is one git commit, answered once
// it exists. One `gitmem serve` per repository per Node process, shared by every store
// on it. No dependencies, no build step: Node 18.20+, CommonJS, with an ES module beside it
// (gitmem-thread-store.mjs) that re-exports this one, so both share the processes.
//
//   import { createKabooRunner } from "@pgege/kaboo-runtime";
//   import { GitMemThreadStore } from "gitmem-kaboo";
//   const runner = createKabooRunner(new GitMemThreadStore({ repo: "/srv/agent-memory" }));
//
// The npm package gitmem-kaboo (templates/kaboo in gitmem), or copied into a project by
// `gitmem kaboo init DIR`; types in gitmem-thread-store.d.cts and .d.mts.
"use strict";

const { spawn, spawnSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

/** The gitmem this adapter was made for (package.json's version is the same). */
const GITMEM_VERSION = "0.1.0";

/** A call that failed: a JSON-RPC error from gitmem serve, the child going away, or no gitmem. */
class GitMemError extends Error {
  constructor(message, { code, data, method } = {}) {
    super(message);
    this.name = "GitMemError";
    this.code = code;
    this.data = data;
    this.method = method;
  }
}

const STDERR_TAIL = 4096; // bytes of the child's stderr kept for error messages
const CLOSE_GRACE_MS = 5000; // after end of input, before SIGTERM (and as long again before SIGKILL)
const HANDSHAKE = "threads.info";
const START_TIMEOUT_MS = 120_000; // spawn to the handshake's answer
const SET_GITMEM = "set GITMEM=/path/to/venv/bin/gitmem (the gitmem console script of the "
  + "virtualenv gitmem is installed in), or pass { gitmem: \"/path/to/venv/bin/gitmem\" }";

// -- finding gitmem ----------------------------------------------------------------------

function isExecutableFile(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

function onPath(name, env) {
  for (const folder of (env.PATH ?? "").split(path.delimiter)) {
    if (folder && isExecutableFile(path.join(folder, name))) return path.join(folder, name);
  }
  return undefined;
}

const pythonImports = new Map(); // python3's path -> whether `python3 -P -c "import gitmem"` works

function importsGitmem(python, env, cwd) {
  if (!pythonImports.has(python)) {
    const done = spawnSync(python, ["-P", "-c", "import gitmem"], { env, cwd, stdio: "ignore", timeout: 30_000 });
    pythonImports.set(python, done.status === 0);
  }
  return pythonImports.get(python);
}

/** How to run gitmem: the `gitmem` option, $GITMEM, `gitmem` on PATH, `python3 -P -m gitmem`. */
function findGitmem(option, env, cwd) {
  for (const [given, where] of [[option, "{ gitmem }"], [env.GITMEM, "GITMEM"]]) {
    if (given === undefined || given === "") continue;
    if (typeof given !== "string") throw new TypeError("GitMemThreadStore: the gitmem option is a path (a string)");
    const file = path.resolve(cwd, given);
    if (isExecutableFile(file)) return [file];
    throw new GitMemError(`${where === "GITMEM" ? `GITMEM=${given}` : `{ gitmem: ${JSON.stringify(given)} }`}: `
      + `${fs.existsSync(file) ? "not an executable file" : "no such file"} (${file}); `
      + "it must be the path of the gitmem executable, e.g. /path/to/venv/bin/gitmem");
  }
  const script = onPath("gitmem", env);
  if (script) return [script];
  const python = onPath("python3", env);
  if (python && importsGitmem(python, env, cwd)) return [python, "-P", "-m", "gitmem"];
  throw new GitMemError("gitmem not found: no gitmem option, GITMEM is not set, no gitmem on PATH, "
    + `and ${python ? `${python} -P -m gitmem` : "python3"} does not import it; ${SET_GITMEM}`);
}

// -- versions ----------------------------------------------------------------------------

/** Whether an adapter for gitmem `made` works with gitmem `served`: the same x.y (0.y) or x. */
function compatible(made, served) {
  const [a, b] = [made, served].map((v) => String(v).split(".").map((n) => Number.parseInt(n, 10)));
  return a[0] === b[0] && (a[0] !== 0 || a[1] === b[1]);
}

function mismatch(served, command) {
  const gitmem = command.slice(0, command.indexOf("serve")).join(" ");
  const newer = compareVersions(served, GITMEM_VERSION) < 0
    ? `update gitmem where it is installed (${pipFor(command)} install --upgrade gitmem, or git pull in its checkout)`
    : `update this adapter to the one gitmem ships: npm install "$(${gitmem} kaboo path)"`
      + ` (copied in: ${gitmem} kaboo init --force DIR)`;
  const [major, minor] = GITMEM_VERSION.split(".");
  return new GitMemError(`gitmem-kaboo ${GITMEM_VERSION} needs gitmem ${major === "0" ? `0.${minor}` : major}.x, but `
    + `${gitmem} is gitmem ${served}: ${newer}`, { method: HANDSHAKE });
}

function compareVersions(a, b) {
  const [x, y] = [a, b].map((v) => String(v).split(".").map((n) => Number.parseInt(n, 10) || 0));
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) - (y[i] ?? 0);
  }
  return 0;
}

function pipFor(command) {
  const [file, ...rest] = command;
  if (rest[0] === "-P") return `${file} -m pip`;
  const pip = path.join(path.dirname(file), "pip");
  return isExecutableFile(pip) ? pip : "pip";
}

// -- one gitmem serve per repository ------------------------------------------------------

const servers = new Map(); // key -> Server: shared by every store with the same command

/** One `gitmem serve` (restarted when it dies) and the stores using it (counted). */
class Server {
  constructor(key, command, spawnOptions) {
    this.key = key;
    this.command = command;
    this.spawnOptions = spawnOptions;
    this.stores = 0;
    this.child = null; // the running child's state, or null
  }

  /** The running child, its version checked; started (and checked) when none runs. */
  connect() {
    const child = this.child ?? this.#start();
    return child.checked;
  }

  request(method, params, timeoutMs) {
    const line = JSON.stringify({ jsonrpc: "2.0", method, params });
    const send = (child) => child.send(method, line, timeoutMs);
    const child = this.child;
    return child?.verified ? send(child) : this.connect().then(send);
  }

  /** End input, wait for the child to exit (SIGTERM, then SIGKILL, after a grace). */
  async stop() {
    const child = this.child;
    if (!child) return;
    child.setRef(true);
    child.process.stdin.end();
    const escalate = setTimeout(() => {
      child.process.kill("SIGTERM");
      setTimeout(() => child.process.kill("SIGKILL"), CLOSE_GRACE_MS).unref();
    }, CLOSE_GRACE_MS);
    await child.closed;
    clearTimeout(escalate);
  }

  #start() {
    const [file, ...args] = this.command;
    const process_ = spawn(file, args, { ...this.spawnOptions, stdio: ["pipe", "pipe", "pipe"] });
    const child = new Child(process_, this.command, () => {
      if (this.child === child) this.child = null;
    });
    this.child = child;
    child.checked = child.send(HANDSHAKE, JSON.stringify({ jsonrpc: "2.0", method: HANDSHAKE, params: {} }), START_TIMEOUT_MS)
      .then((info) => {
        if (!compatible(GITMEM_VERSION, info?.version)) throw mismatch(info?.version, this.command);
        child.verified = true;
        return child;
      }, (error) => {
        if (error.code !== -32601) throw error; // -32601: a gitmem from before the handshake
        return child.send("storage.info", JSON.stringify({ jsonrpc: "2.0", method: "storage.info", params: {} }), START_TIMEOUT_MS)
          .then((info) => {
            if (!compatible(GITMEM_VERSION, info?.version)) throw mismatch(info?.version, this.command);
            child.verified = true; // its threads.* are these (the answer cap: lifted by --max-response 0)
            return child;
          });
      })
      .catch((error) => {
        child.process.stdin.end(); // a gitmem we cannot work with (or that never answered): let it go
        setTimeout(() => child.process.kill("SIGKILL"), CLOSE_GRACE_MS).unref();
        throw error;
      });
    child.checked.catch(() => {}); // handed to every caller; unhandled only if none asks
    return child;
  }
}

/** The state of one running `gitmem serve`: its pipes and the calls waiting for answers. */
class Child {
  constructor(process_, command, onEnd) {
    this.process = process_;
    this.pending = new Map(); // request id -> { resolve, reject, method, timer }
    this.nextId = 1;
    this.verified = false;
    this.ended = false;
    let stderr = "";
    let partial = [];
    this.closed = new Promise((resolve) => {
      const end = (why) => {
        if (this.ended) return;
        this.ended = true;
        onEnd();
        const tail = stderr.trim().split("\n").pop();
        const message = `gitmem serve ${why}${tail ? `: ${tail}` : ""}`;
        for (const id of [...this.pending.keys()]) {
          this.settle(id, new GitMemError(message, { method: this.pending.get(id).method }));
        }
        resolve();
      };
      process_.on("error", (error) => end(`could not be run (${command.join(" ")}): ${error.message}`));
      process_.on("close", (code, signal) => end(signal ? `was killed by ${signal}` : `exited with code ${code}`));
    });
    process_.stdout.on("data", (chunk) => {
      let start = 0;
      let newline;
      while ((newline = chunk.indexOf(10, start)) !== -1) {
        partial.push(chunk.subarray(start, newline));
        this.answer(Buffer.concat(partial).toString("utf8"));
        partial = [];
        start = newline + 1;
      }
      if (start < chunk.length) partial.push(chunk.subarray(start));
    });
    process_.stderr.on("data", (chunk) => {
      stderr = (stderr + chunk.toString("utf8")).slice(-STDERR_TAIL);
    });
    process_.stdin.on("error", () => {}); // a dead child: its "close" rejects the calls
  }

  setRef(on) {
    for (const handle of [this.process, this.process.stdin, this.process.stdout, this.process.stderr]) {
      if (on) handle?.ref?.();
      else handle?.unref?.();
    }
  }

  /** Send a request line (without its id, added here); resolves to its result. */
  send(method, line, timeoutMs) {
    if (this.ended) return Promise.reject(new GitMemError("gitmem serve has exited", { method }));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = timeoutMs > 0
        ? setTimeout(() => this.settle(id, new GitMemError(
            `${method}: no answer from gitmem serve within ${timeoutMs} ms`, { method })), timeoutMs)
        : null;
      this.pending.set(id, { resolve, reject, method, timer });
      this.setRef(true);
      this.process.stdin.write(`{"id":${id},${line.slice(1)}\n`);
    });
  }

  settle(id, error, result) {
    const call = this.pending.get(id);
    if (!call) return; // timed out already, or answered twice
    this.pending.delete(id);
    if (call.timer) clearTimeout(call.timer);
    if (this.pending.size === 0) this.setRef(false); // idle: do not keep the user's process alive
    if (error) call.reject(error);
    else call.resolve(result);
  }

  answer(line) {
    let answer;
    try {
      answer = JSON.parse(line);
    } catch (error) {
      // Stored data that is not JSON (a bad commit made with plain git) fails its call only.
      const id = /^\{"jsonrpc":"2\.0","id":(\d+),/.exec(line)?.[1];
      if (id !== undefined) {
        const method = this.pending.get(Number(id))?.method;
        this.settle(Number(id), new GitMemError(`gitmem serve's answer is not JSON: ${error.message}`, { method }));
      }
      return;
    }
    if (answer?.error) {
      const { code, message, data } = answer.error;
      this.settle(answer.id, new GitMemError(String(message), { code, data, method: this.pending.get(answer.id)?.method }));
    } else {
      this.settle(answer?.id, null, answer?.result);
    }
  }
}

// -- the store ----------------------------------------------------------------------------

class GitMemThreadStore {
  #server;
  #timeoutMs;
  #closed = false;
  #inFlight = new Set(); // this store's calls not answered yet

  /**
   * @param {{ repo?: string, create?: boolean, gitmem?: string, command?: string[], cwd?: string,
   *           env?: Record<string, string | undefined>, timeoutMs?: number }} options
   *   See gitmem-thread-store.d.cts. Throws a GitMemError at once when no gitmem is found.
   */
  constructor({ repo, create = false, gitmem, command, cwd, env, timeoutMs = 120_000 } = {}) {
    if (command === undefined && typeof repo !== "string") {
      throw new TypeError("GitMemThreadStore needs { repo: PATH } or { command: [...] }");
    }
    const childEnv = env ?? process.env;
    const folder = cwd ?? process.cwd();
    if (command === undefined) {
      let where = path.resolve(folder, repo);
      try {
        where = fs.realpathSync(where);
      } catch {} // not there yet: made when `create`, else gitmem serve answers why not
      command = [...findGitmem(gitmem, childEnv, folder), "serve", "--repo", where, "--max-response", "0",
        ...(create ? ["--create"] : [])];
    }
    const key = JSON.stringify([command, cwd ?? null, env ?? null]);
    let server = servers.get(key);
    if (!server) {
      server = new Server(key, command, { cwd, env: childEnv });
      servers.set(key, server);
    }
    server.stores++;
    this.#server = server;
    this.#timeoutMs = timeoutMs;
  }

  /** The pid of the running `gitmem serve`, or undefined when none runs. */
  get pid() {
    return this.#server.child?.process.pid;
  }

  /** Start `gitmem serve` (shared) if none runs, and check its version. */
  async ready() {
    if (this.#closed) throw new GitMemError("GitMemThreadStore is closed");
    await this.#server.connect();
  }

  async appendEvents(threadId, agentId, events, ownerId) {
    await this.#call("threads.appendEvents", { threadId, agentId, events, ownerId });
  }

  async readEvents(threadId) {
    return (await this.#call("threads.readEvents", { threadId })).events;
  }

  async readState(threadId) {
    return (await this.#call("threads.readState", { threadId })).state;
  }

  async saveMessages(threadId, messages) {
    await this.#call("threads.saveMessages", { threadId, messages });
  }

  async readMessages(threadId) {
    return (await this.#call("threads.readMessages", { threadId })).messages;
  }

  async listThreads(filter) {
    // An undefined ownerId disappears in JSON: no filter. A null one stays: no owner.
    return (await this.#call("threads.list", { filter: { ownerId: filter?.ownerId } })).threads;
  }

  async clear(threadId) {
    if (threadId !== undefined && typeof threadId !== "string") {
      throw new TypeError("clear(threadId): threadId must be a string, or omitted to clear all");
    }
    await this.#call("threads.clear", { threadId });
  }

  /** Let this store's calls be answered; the last store of a repository to close stops its
   *  `gitmem serve`. Later calls are rejected. */
  async close() {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.allSettled([...this.#inFlight]);
    const server = this.#server;
    if (--server.stores > 0) return;
    if (servers.get(server.key) === server) servers.delete(server.key);
    await server.stop();
  }

  #call(method, params) {
    if (this.#closed) {
      return Promise.reject(new GitMemError("GitMemThreadStore is closed", { method }));
    }
    const call = this.#server.request(method, params, this.#timeoutMs);
    this.#inFlight.add(call);
    const forget = () => this.#inFlight.delete(call);
    call.then(forget, forget);
    return call;
  }
}

module.exports = { GitMemThreadStore, GitMemError, GITMEM_VERSION };
