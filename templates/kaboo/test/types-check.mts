// Compiled (never run) by types.test.mjs: the adapter's declarations must satisfy
// kaboo-runtime's ThreadStore as kaboo declares it, with the real @ag-ui types.
import type { BaseEvent, Message } from "@ag-ui/core";
import { GITMEM_VERSION, GitMemError, GitMemThreadStore } from "../gitmem-thread-store.mjs";

// kaboo-runtime src/store.ts (newest documented form)
interface StoredThread { id: string; agentId: string; ownerId: string | null; createdAt: number; updatedAt: number }
interface ListThreadsFilter { ownerId?: string | null }
interface ThreadStore {
  appendEvents(threadId: string, agentId: string, events: BaseEvent[], ownerId?: string | null): Promise<void>;
  readEvents(threadId: string): Promise<BaseEvent[]>;
  readState(threadId: string): Promise<Record<string, unknown> | null>;
  saveMessages(threadId: string, messages: Message[]): Promise<void>;
  readMessages(threadId: string): Promise<Message[]>;
  listThreads(filter?: ListThreadsFilter): Promise<StoredThread[]>;
  clear(threadId?: string): Promise<void>;
}
declare function createKabooRunner(store: ThreadStore): unknown;

const store = new GitMemThreadStore({ repo: "/srv/agent-memory", timeoutMs: 30_000 });
createKabooRunner(store);
createKabooRunner(new GitMemThreadStore({ command: ["python3", "-P", "-m", "gitmem", "serve", "--repo", "x"] }));
createKabooRunner(new GitMemThreadStore({ repo: "x", gitmem: "/srv/venv/bin/gitmem", env: { GITMEM: undefined } }));
const madeFor: string = GITMEM_VERSION;

export async function roundTrip(event: BaseEvent, message: Message): Promise<void> {
  await store.ready();
  await store.appendEvents("t1", "agent", [event, { type: "CUSTOM", name: "n", value: 1 }], "alice");
  const events: BaseEvent[] = await store.readEvents("t1");
  const state: Record<string, unknown> | null = await store.readState("t1");
  await store.saveMessages("t1", [message, { id: "m1", role: "user", content: "hi" }]);
  const messages: Message[] = await store.readMessages("t1");
  const threads: StoredThread[] = await store.listThreads({ ownerId: null });
  await store.clear("t1");
  await store.close();
  try {
    await store.readEvents("t1");
  } catch (error) {
    if (error instanceof GitMemError) console.log(error.code, error.method, error.message);
  }
  console.log(events.length, state, messages.length, threads[0]?.updatedAt, store.pid, madeFor);
}

// @ts-expect-error: a thread id is a string
store.readEvents(42);
