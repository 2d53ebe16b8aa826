// Types of gitmem-thread-store.mjs. kaboo's ThreadStore and the AG-UI shapes it uses
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
  /** The gitmem repository (created when missing); runs `gitmem serve --repo <repo>`. */
  repo?: string;
  /** The command to run instead, e.g. `["python3", "-P", "-m", "gitmem", "serve", "--repo", path, "--max-response", "0"]`
   *  (`-P`: the current folder, which may hold a `gitmem/` folder, is not searched for the package). */
  command?: string[];
  /** Working folder of the child process. */
  cwd?: string;
  /** Environment of the child process (default: this process's). */
  env?: Record<string, string | undefined>;
  /** How long a call may wait for its answer, in ms (default 120000; 0: forever). */
  timeoutMs?: number;
}

/** A failed call: `code` and `data` are the JSON-RPC error's when gitmem serve answered one. */
export declare class GitMemError extends Error {
  constructor(message: string, details?: { code?: number; data?: unknown; method?: string });
  readonly code: number | undefined;
  readonly data: unknown;
  readonly method: string | undefined;
}

/**
 * kaboo's ThreadStore on a gitmem repository: one git commit per write. Starts
 * `gitmem serve` on first use and again after it dies (calls in flight are rejected).
 */
export declare class GitMemThreadStore implements ThreadStore {
  constructor(options: GitMemThreadStoreOptions);
  /** The pid of the running `gitmem serve`, or undefined when none runs. */
  readonly pid: number | undefined;
  /** Let gitmem serve answer what it was sent, then stop it; later calls are rejected. */
  close(): Promise<void>;
}

/** The ThreadStore methods, declared once above (the class and this interface merge). */
export interface GitMemThreadStore extends ThreadStore {}
