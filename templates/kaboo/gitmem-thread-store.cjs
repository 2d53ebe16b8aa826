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
const { randomUUID } = require("node:crypto");
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
const WRITES = new Set(["threads.appendEvents", "threads.saveMessages", "threads.clear"]);
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

const pythonsImporting = new Set(); // python3 paths where `python3 -P -c "import gitmem"` worked

function importsGitmem(python, env, cwd) {
  if (!pythonsImporting.has(python)) { // a failure is asked again: gitmem may be installed since
    const done = spawnSync(python, ["-P", "-c", "import gitmem"], { env, cwd, stdio: "ignore", timeout: 30_000 });
    if (done.status === 0) pythonsImporting.add(python);
  }
  return pythonsImporting.has(python);
}

/** The gitmem the user named, `GITMEM=...` or `{ gitmem: "..." }`, as error messages name it. */
function namedGitmem(option, env) {
  if (option !== undefined && option !== "") {
    if (typeof option !== "string") throw new TypeError("GitMemThreadStore: the gitmem option is a path (a string)");
    return [option, `{ gitmem: ${JSON.stringify(option)} }`];
  }
  return env.GITMEM ? [env.GITMEM, `GITMEM=${env.GITMEM}`] : [];
}

/** How to run gitmem: the `gitmem` option, $GITMEM, `gitmem` on PATH, `python3 -P -m gitmem`. */
function findGitmem(option, env, cwd) {
  const [given, named] = namedGitmem(option, env);
  if (given !== undefined) {
    const file = path.resolve(cwd, given);
    if (isExecutableFile(file)) return [file];
    throw new GitMemError(`${named}: ${fs.existsSync(file) ? "not an executable file" : "no such file"} (${file}); `
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

/** One `gitmem serve` (replaced when it dies or hangs) and the stores using it (counted). */
class Server {
  constructor(key, command, spawnOptions, named) {
    this.key = key;
    this.command = command;
    this.spawnOptions = spawnOptions;
    this.named = named; // how the user named gitmem (`GITMEM=...`), for a start that is not gitmem's
    this.stores = 0;
    this.child = null; // the running child's state, or null
    this.stopping = false;
  }

  /** The running child, its version checked; started (and checked) when none runs. */
  connect() {
    const child = this.child ?? this.#start();
    return child.checked;
  }

  /** Send a call. One whose gitmem serve ended before answering is sent once more, to a new
   *  one; a write goes with a requestKey, so that gitmem does not commit it twice. */
  request(method, params, timeoutMs) {
    const line = JSON.stringify({ jsonrpc: "2.0", method,
      params: WRITES.has(method) ? { ...params, requestKey: randomUUID() } : params });
    const send = (child) => child.send(method, line, timeoutMs);
    const attempt = () => {
      const child = this.child;
      return child?.verified ? send(child) : this.connect().then(send);
    };
    return attempt().catch((error) => {
      if (!resendable.has(error) || this.stopping) throw error;
      return attempt();
    });
  }

  /** End input, wait for the child to exit (SIGTERM, then SIGKILL, after a grace). */
  async stop() {
    this.stopping = true;
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
    const ask = (method) => child.send(method, JSON.stringify({ jsonrpc: "2.0", method, params: {} }), START_TIMEOUT_MS);
    child.checked = ask(HANDSHAKE)
      .catch((error) => {
        if (error.code !== -32601) throw error; // -32601: a gitmem from before the handshake,
        return ask("storage.info"); // whose threads.* are these (the answer cap: lifted by --max-response 0)
      })
      .then((info) => {
        if (typeof info?.version !== "string") throw this.#notGitmem(`it answered ${HANDSHAKE} with ${JSON.stringify(info)}`);
        if (!compatible(GITMEM_VERSION, info.version)) throw mismatch(info.version, this.command);
        child.verified = true;
        return child;
      })
      .catch((error) => {
        child.detach(); // the next call starts again: the cause may be fixed by then
        child.process.stdin.end(); // a gitmem we cannot work with (or that never answered): let it go
        setTimeout(() => child.process.kill("SIGKILL"), CLOSE_GRACE_MS).unref();
        throw error.code === undefined && !child.spoke ? this.#notGitmem(error.message) : error;
      });
    child.checked.catch(() => {}); // handed to every caller; unhandled only if none asks
    return child;
  }

  /** The error of a start whose program never spoke gitmem's protocol: it names where that
   *  program came from (`GITMEM=/bin/true`), which is what to fix. */
  #notGitmem(why) {
    const fix = this.named === undefined ? SET_GITMEM
      : this.named === "{ command }" ? "the command must run `gitmem serve`"
        : `${this.named.startsWith("GITMEM") ? "GITMEM" : "the gitmem option"} must be the path of the gitmem `
          + "executable, e.g. /path/to/venv/bin/gitmem";
    const who = this.named ?? `${this.command[0]} (found on PATH)`;
    return new GitMemError(`${who} did not answer as gitmem serve (${why}); ${fix}`, { method: HANDSHAKE });
  }
}

const resendable = new WeakSet(); // errors of calls whose gitmem serve ended before answering

/** The state of one running `gitmem serve`: its pipes and the calls waiting for answers. */
class Child {
  constructor(process_, command, detach) {
    this.process = process_;
    this.detach = detach; // the server no longer hands out this child
    this.pending = new Map(); // request id -> { resolve, reject, method, timer }
    this.nextId = 1;
    this.verified = false;
    this.ended = false;
    this.killed = false; // killed because a call timed out
    this.spoke = false; // it wrote to stderr, or a line of JSON
    let stderr = "";
    let partial = [];
    this.closed = new Promise((resolve) => {
      const end = (why) => {
        if (this.ended) return;
        this.ended = true;
        detach();
        const tail = stderr.trim().split("\n").pop();
        const message = `gitmem serve ${why}${tail ? `: ${tail}` : ""}`;
        for (const [id, { method }] of [...this.pending]) {
          const error = new GitMemError(message, { method });
          if (this.verified) resendable.add(error);
          this.settle(id, error);
        }
        resolve();
      };
      process_.on("error", (error) => end(`could not be run (${command.join(" ")}): ${error.message}`));
      process_.on("close", (code, signal) => end(signal ? `was killed by ${signal}` : `exited with code ${code}`));
      // Killed: done at its exit, even while something it started still holds its pipes.
      process_.on("exit", (code, signal) => {
        if (this.killed) end(`was killed by ${signal ?? "SIGKILL"} after a call got no answer in time`);
      });
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
      this.spoke = true;
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
    if (this.ended || this.killed) return Promise.reject(new GitMemError("gitmem serve has exited", { method }));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = timeoutMs > 0 ? setTimeout(() => this.timedOut(id, method, timeoutMs), timeoutMs) : null;
      this.pending.set(id, { resolve, reject, method, timer });
      this.setRef(true);
      this.process.stdin.write(`{"id":${id},${line.slice(1)}\n`);
    });
  }

  /** No answer in time: gitmem serve is taken for hung (a SIGSTOP, a full disk) and killed, so
   *  that the next call starts a new one instead of waiting as long again. Its other calls
   *  are sent again to that one once it has exited. */
  timedOut(id, method, timeoutMs) {
    this.settle(id, new GitMemError(`${method}: no answer from gitmem serve within ${timeoutMs} ms; `
      + `it was killed (pid ${this.process.pid}) and the next call starts a new one`, { method }));
    if (this.ended || this.killed) return;
    this.killed = true;
    this.detach();
    this.process.kill("SIGKILL");
    this.process.stdin.destroy(); // a process it started, holding the pipes, reads the end
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
    this.spoke = true;
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
    const named = command === undefined ? namedGitmem(gitmem, childEnv)[1] : "{ command }";
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
      server = new Server(key, command, { cwd, env: childEnv }, named);
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
