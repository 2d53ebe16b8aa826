// Types of gitmem-thread-store.cjs (and, through gitmem-thread-store.d.mts, of the .mjs
// that re-exports it). kaboo's ThreadStore and the AG-UI shapes it uses
// are declared here structurally, so the adapter needs no package: an `@ag-ui/client`
// BaseEvent or Message is accepted where these are, and these are accepted back.

/** An AG-UI event (`@ag-ui/client` BaseEvent): a `type` plus any fields, stored verbatim. */
export interface BaseEvent {
  type: any;
  timestamp?: number;
  rawEvent?: any;
  [field: string]: any;
}

/** An AG-UI message (`@ag-ui/client` Message), stored verbatim. */
export interface Message {
  id: string;
  role: any;
  [field: string]: any;
}

/** One thread as `listThreads` gives it; times are epoch milliseconds. */
export interface StoredThread {
  id: string;
  agentId: string;
  ownerId: string | null;
  createdAt: number;
  updatedAt: number;
}

/** `ownerId` undefined: every thread; null: threads without owner; a string: that owner's. */
export interface ListThreadsFilter {
  ownerId?: string | null;
}

/** kaboo-runtime's ThreadStore contract. */
export interface ThreadStore {
  appendEvents(threadId: string, agentId: string, events: BaseEvent[], ownerId?: string | null): Promise<void>;
  readEvents(threadId: string): Promise<BaseEvent[]>;
  readState(threadId: string): Promise<Record<string, unknown> | null>;
  saveMessages(threadId: string, messages: Message[]): Promise<void>;
  readMessages(threadId: string): Promise<Message[]>;
  listThreads(filter?: ListThreadsFilter): Promise<StoredThread[]>;
  clear(threadId?: string): Promise<void>;
}

export interface GitMemThreadStoreOptions {
  /** The gitmem repository; runs `<gitmem> serve --repo <repo>`. A missing one is an error
   *  naming the nearest gitmem repository, unless `create`. */
  repo?: string;
  /** Create the repository at `repo` when it is missing (`gitmem serve --create`). */
  create?: boolean;
  /** The gitmem executable, e.g. `/srv/venv/bin/gitmem`. Without it: `$GITMEM`, then `gitmem`
   *  on PATH, then `python3 -P -m gitmem` where that imports; the constructor throws a
   *  GitMemError when none is found. */
  gitmem?: string;
  /** The whole command to run instead (not checked before it runs), e.g.
   *  `["python3", "-P", "-m", "gitmem", "serve", "--repo", path]`
   *  (`-P`: the current folder, which may hold a `gitmem/` folder, is not searched for the package). */
  command?: string[];
  /** Working folder of the child process (and what a relative `repo` or `gitmem` is taken from). */
  cwd?: string;
  /** Environment of the child process (default: this process's); `GITMEM` and `PATH` are read from it. */
  env?: Record<string, string | undefined>;
  /** How long a call may wait for its answer, in ms (default 120000; 0: forever). A gitmem
   *  serve that makes a call wait longer is taken for hung: it is killed, and the next call
   *  starts a new one. */
  timeoutMs?: number;
}

/** The gitmem version this adapter was made for: `gitmem serve` must be the same x.y (0.y). */
export declare const GITMEM_VERSION: string;

/** A failed call: `code` and `data` are the JSON-RPC error's when gitmem serve answered one. */
export declare class GitMemError extends Error {
  constructor(message: string, details?: { code?: number; data?: unknown; method?: string });
  readonly code: number | undefined;
  readonly data: unknown;
  readonly method: string | undefined;
}

/**
 * kaboo's ThreadStore on a gitmem repository: one git commit per write. One `gitmem serve`
 * per repository per process, shared by its stores, started on first use (or `ready()`)
 * and again by the next call after it dies, hangs past `timeoutMs` or fails to start; its
 * version is checked first. Calls in flight when it dies are sent once more, to the new
 * one: each write goes with a `requestKey`, so that it is committed once.
 */
export declare class GitMemThreadStore implements ThreadStore {
  constructor(options: GitMemThreadStoreOptions);
  /** The pid of the running `gitmem serve`, or undefined when none runs. */
  readonly pid: number | undefined;
  /** Start gitmem serve if none runs and check its version; rejects with a GitMemError saying why not. */
  ready(): Promise<void>;
  /** Let this store's calls be answered; the last store of a repository stops its gitmem serve.
   *  Later calls are rejected. */
  close(): Promise<void>;
}

/** The ThreadStore methods, declared once above (the class and this interface merge). */
export interface GitMemThreadStore extends ThreadStore {}
